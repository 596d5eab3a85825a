"""How the front ends show things to people: keys typed as text and values shown (text), progress of long
work (progress). Used by the CLI, the HTTP API, the maintenance jobs and the Airflow page; pure Python."""
