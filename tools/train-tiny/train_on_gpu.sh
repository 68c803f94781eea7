#!/usr/bin/env bash
# Trains both tiny models on the GPU machine inside one device call (under 10 minutes): masked-LM
# pretraining of models/tiny-en's backbone, then the section classifier on it. Float32 checkpoints land in
# OUT/mlm and OUT/sections, the shipped float16 models (ship_models.py) in OUT/models.
#
#   tools/train-tiny/train_on_gpu.sh WORK OUT [PRETRAIN_MINUTES] [FINETUNE_MINUTES]
#
# WORK holds corpus/{train,heldout}.ids.npy and corpus/heldout.txt (encode_corpus.py) and
# sections/{train,heldout}.tsv (build_corpus.py); the tokenizer is models/tiny-en (train_tokenizer.py).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$1 out=$2 pretrain_minutes=${3:-6} finetune_minutes=${4:-2}
tokenizer="$here/../../models/tiny-en"
python3 "$here/pretrain_mlm.py" --corpus "$work/corpus" --tokenizer "$tokenizer" --out "$out/mlm" \
  --minutes "$pretrain_minutes"
python3 "$here/finetune_sections.py" --sections "$work/sections" --backbone "$out/mlm" --tokenizer "$tokenizer" \
  --out "$out/sections" --minutes "$finetune_minutes"
python3 "$here/ship_models.py" --mlm "$out/mlm" --sections "$out/sections" --tokenizer "$tokenizer" \
  --out "$out/models"
