"""Licence ids: the Hub's for a dataset card, SPDX expressions (or a Hub id) for bank files.

A licence string that is neither (``"free"``, ``"cc by"``, ``"CC-BY-4"``) is refused with the
field and value, rather than written into a card the Hub then flags, or into every record.
"""

from __future__ import annotations

# The ids the Hub accepts in a card's ``license:`` (https://huggingface.co/docs/hub/repositories-licenses).
HUB_LICENCES = frozenset("""
apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0
bigcode-openrail-m afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc
cc0-1.0 cc-by-2.0 cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0
cc-by-nc-4.0 cc-by-nd-4.0 cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0
cdla-sharing-1.0 cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1
eupl-1.2 agpl-3.0 gfdl gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research intel-research lppl-1.3c
ms-pl apple-ascl apple-amlr mpl-2.0 odc-by odbl openmdw-1.0 openrail++ osl-3.0 postgresql ofl-1.1 ncsa
unlicense zlib pddl lgpl-lr deepfloyd-if-license fair-noncommercial-research-license llama2 llama3
llama3.1 llama3.2 llama3.3 llama4 grok2-community gemma unknown other
""".split())


def hub_licence(value: str, field: str = "--license") -> str:
    """``value`` as the Hub's card id (case-insensitive; ``CC-BY-4.0`` -> ``cc-by-4.0``), or a ``ValueError``."""
    v = value.strip().lower()
    if v in HUB_LICENCES:
        return v
    raise ValueError(f"{field}: not a Hub licence id (got {value!r}; e.g. cc-by-4.0, cc0-1.0, apache-2.0, "
                     "or 'other' with the terms in the card)")


def file_licence(value: str) -> str:
    """A bank file's licence: an SPDX expression (``CC-BY-SA-3.0``, ``MIT OR CC0-1.0``,
    ``LicenseRef-my-terms``) or a Hub id; returned as given. A ``ValueError`` otherwise."""
    if value.strip().lower() in HUB_LICENCES:
        return value
    from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression  # packaging >= 24.2

    try:
        canonicalize_license_expression(value)
    except InvalidLicenseExpression:
        raise ValueError("not an SPDX licence expression or Hub licence id (e.g. CC-BY-4.0, CC0-1.0, "
                         "or LicenseRef-NAME for other terms)") from None
    return value
