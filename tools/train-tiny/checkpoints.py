"""How the training scripts leave a checkpoint: HF format, shards under 16 MB (what the device tool brings back
in one file each), and the run's state beside it."""
import json


def save_checkpoint(model, out, state_name, state):
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), max_shard_size="15MB")
    (out / state_name).write_text(json.dumps(state, indent=1) + "\n")
    print(json.dumps(state), flush=True)
