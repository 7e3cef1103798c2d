"""Text as a report writes it: secrets redacted, and only characters XML 1.0 allows.

A report (the table, JSON, JUnit XML, HTML) carries what the runs produced: the model's
answer, failures quoting stop details and exceptions, the fixtures' names. Every such string
goes through `reported`: the loop's redaction (the eval loops are built with the default
patterns, so `Redactor()`), then, for XML and HTML, `xml_safe`.
"""

from __future__ import annotations

import re
from typing import Final

from ..redaction import Redactor

redact: Final = Redactor()
"""The eval loops' redaction: `build_loop` adds no patterns, so the defaults."""

_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""What XML 1.0 forbids: controls below 0x20 but tab, newline and CR; surrogates; U+FFFE, U+FFFF."""


def xml_safe(text: str) -> str:
    """`text` with each character XML 1.0 forbids replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def reported(text: object) -> str:
    """`text` as XML or HTML may carry it: redacted, then `xml_safe`."""
    return xml_safe(redact(str(text)))
