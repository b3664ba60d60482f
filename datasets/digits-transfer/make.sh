#!/bin/sh
# Writes the two image folders of the transfer-learning example (configs/finetune_digits.yaml)
# from the bundled MNIST sample: digits 0-4 to pretrain on, and a few digits 5-9 to fine-tune on.
# Run from the repository root after building: sh datasets/digits-transfer/make.sh
set -eu
trainer=${TRAINER:-build/trainer}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The first 100 train and 50 test images of each digit of datasets/mnist-sample, as PNG files.
"$trainer" export-images --config configs/lenet.yaml --out "$tmp" --limit-per-class 100,50
rm -rf "$here/pretrain-0to4" "$here/finetune-5to9"
# first N files of folder $1 (by name) into folder $2
take() {
  mkdir -p "$2"
  ls "$1" | sort | head -n "$3" | while read -r f; do cp "$1/$f" "$2/$f"; done
}
for d in 0 1 2 3 4; do
  take "$tmp/train/$d" "$here/pretrain-0to4/train/$d" 100
  take "$tmp/test/$d" "$here/pretrain-0to4/test/$d" 20
done
for d in 5 6 7 8 9; do
  take "$tmp/train/$d" "$here/finetune-5to9/train/$d" 5
  take "$tmp/test/$d" "$here/finetune-5to9/test/$d" 50
done
