"""The spark-submit entry points, shipped in the package as statestore.jobs: each file is an
application `spark-submit` takes (`python -c "import statestore.jobs as j; print(j.__path__[0])"`
prints where they are installed). Every rule lives in the library; these only call its main()."""
