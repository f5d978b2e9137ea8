"""Running a resolved route for one question: the runner, the merge of parallel branches, and
the services (store, models) a stage may use."""
