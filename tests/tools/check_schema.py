#!/usr/bin/env python3
"""Validates JSON files against a JSON Schema with Debian's python3-jsonschema, an implementation
independent of dtsim's. Usage: check_schema.py SCHEMA FILE...; prints one line per error, exits 1
if any file does not match."""
import json
import sys

import jsonschema

schema = json.load(open(sys.argv[1]))
jsonschema.validators.validator_for(schema).check_schema(schema)
validator = jsonschema.validators.validator_for(schema)(schema)
bad = 0
for path in sys.argv[2:]:
    for error in validator.iter_errors(json.load(open(path))):
        bad += 1
        print(f"{path}: /{'/'.join(str(p) for p in error.absolute_path)}: {error.message}")
print(f"{len(sys.argv) - 2} files, {bad} errors")
sys.exit(1 if bad else 0)
