"""Airflow adapters over the statestore library: the hook, the store page, DAG helpers.

Importable because Airflow puts its plugins folder on sys.path; plugins/.airflowignore keeps
the plugin loader from importing these modules a second time as top-level modules.
"""
