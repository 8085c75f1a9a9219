#!/bin/sh
# Fails when the table in docs/configuration.md differs from what the settings table generates.
# usage: check_config_doc.sh <ft-print-config> <docs/configuration.md>
set -eu
printer=$1
doc=$2
expected=$(mktemp)
actual=$(mktemp)
trap 'rm -f "$expected" "$actual"' EXIT
"$printer" --markdown > "$expected"
sed -n '/<!-- table:begin -->/,/<!-- table:end -->/p' "$doc" | sed '1d;$d' > "$actual"
if ! diff -u "$expected" "$actual"; then
  echo "docs/configuration.md is out of date: regenerate its table with 'ft-print-config --markdown'" >&2
  exit 1
fi
