"""Deprecated: this package's public modules moved (`boundloop.tools`, `boundloop.signals`).

`boundloop.handlers.tools`, `.stops` and `.registry` still import, with a `DeprecationWarning`,
for one release.
"""
