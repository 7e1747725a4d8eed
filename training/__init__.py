"""Training and evaluating the write gate's instruction classifier (workshop code, not in the wheel).

Run from a source checkout, after `pip install -e '.[train]'`:

    python -m training.fetch_data          # the only step that downloads: the pinned source wheels
    python -m training.train_detector      # writes pymem/admission/classifier_v1.bin (--check compares)
    python -m training.evaluate_loso       # the leave-one-source-out table: training/REPORT.md and
                                           # pymem/admission/classifier_loso.json, which
                                           # `pymem eval admission` prints
    python -m training.bench_cost          # writes training/COST.md

It uses the library only through the detector's API (`pymem.admission`'s normalisation, pieces,
features, signals, signatures, classifier and model file), the same code the gate runs.
"""
