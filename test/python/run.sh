#!/bin/sh
# Runs the Python unit tests (test/python/test_*.py) with the first of $KBRL_PYTHON, python3 and
# /usr/bin/python3 that imports torch - the interpreter the evaluation worker would use.
here=$(cd "$(dirname "$0")" && pwd)
for py in "${KBRL_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import torch" 2>/dev/null; then
    exec "$py" -m unittest discover -s "$here" -v
  fi
done
echo "no Python with torch found (tried \$KBRL_PYTHON, python3, /usr/bin/python3)" >&2
exit 1
