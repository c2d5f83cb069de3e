"""verl console logs (and the file logger's JSONL): `docs/formats/verl.md`."""
