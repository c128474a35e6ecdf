"""Stand-in for slime/observability/rollout_data_utils.py (624b824a), for tests only.

slime writes `{"rollout_id", "samples": [Sample.to_dict()]}` with torch.save; torch does not
exist where the tests run, so this stand-in pickles the same dictionary (torch.save is a pickle
format too, but its reader is torch.load)."""

import pickle
from pathlib import Path


def save_debug_rollout_data(path_template, data, *, rollout_id, evaluation):
    path = Path(path_template.format(rollout_id=("eval_" if evaluation else "") + str(rollout_id)))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump({"rollout_id": rollout_id, "samples": [sample.to_dict() for sample in data]}, f)


def load_debug_rollout_data(path_template, *, rollout_id):
    with open(path_template.format(rollout_id=rollout_id), "rb") as f:
        return pickle.load(f)["samples"]
