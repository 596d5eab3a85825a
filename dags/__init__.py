"""The provider's DAGs, shipped in the package as statestore_airflow.example_dags: point a DAG
bundle (or the DAGs folder) at `python -c "import statestore_airflow.example_dags as d;
print(d.__path__[0])"`, or copy the files into your own DAGs folder."""
