"""pymem's benchmarks and evaluations: workshop code of the source checkout, not in the wheel.

Run through the CLI of a development install (`pip install -e '.[test]'` from a clone): `pymem
bench ...` (bench, deliver_bench, langgraph_bench, admission_bench, load_bench; wire counts round
trips) and `pymem eval recall` (eval_recall). They import the library like any user of it.
"""
