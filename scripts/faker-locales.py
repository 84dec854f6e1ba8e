"""Writes src/generate/assets/faker_locales.jsonl.gz: what the person_from_faker sampler draws from.

DataDesigner's person_from_faker sampler calls Python's Faker (faker<21, 20.1.0 here) for every
field. synthgate does not run Python when generating, so this script takes Faker's data out once,
for every locale DataDesigner accepts (`AVAILABLE_LOCALES`):

* a field Faker draws from one fixed list (first names, last names, most cities, states, jobs,
  countries) is written as that list, with Faker's weights where the list has them, so draws
  follow Faker's own distribution;
* a field Faker builds from formats and random digits (street names, building numbers, post
  codes, phone numbers, cities of some locales) is written as a sample of POOL values drawn with
  a fixed seed;
* a field the locale does not have (Faker raises AttributeError, and DataDesigner gives null) is
  written as null.

One JSON object per line, one line per locale, so the service decompresses the file as a stream
and keeps only the locales a job asks for. A list already written for an earlier field (many
locales share English jobs, most share one last-name list for both sexes) is written as
{"ref": "<locale>/<field>"}, naming where it was first written. The output is byte-for-byte reproducible; the test
`faker_locale_asset_is_reproducible` runs this script and compares.

Run with DataDesigner's interpreter: .venv-datadesigner/bin/python scripts/faker-locales.py [OUT]
"""

import gzip
import io
import json
import os
import sys

# Some locales (et_EE) draw from sets, whose order follows the string hash: fix it.
if os.environ.get("PYTHONHASHSEED") != "0":
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})

from data_designer.config.utils.constants import AVAILABLE_LOCALES
from faker import Faker

POOL = 128
PROBE = 3000

# Field (DataDesigner's Faker call) -> the provider lists Faker may draw it from.
FIELDS = {
    "first_name_male": ["first_names_male", "first_names"],
    "first_name_female": ["first_names_female", "first_names"],
    "last_name_male": ["last_names_male", "last_names"],
    "last_name_female": ["last_names_female", "last_names"],
    "building_number": [],
    "street_name": [],
    "city": ["cities"],
    "state": ["states"],
    "postcode": [],
    "country": ["countries"],
    "job": ["jobs"],
    "phone_number": [],
}


def exact_list(fake, probe, candidates):
    """The provider list the probe's values all come from, as {"v", "w"?}, or None."""
    seen = set(probe)
    for name in candidates:
        for provider in fake._factories[0].providers:
            coll = getattr(provider, name, None)
            if coll is None:
                continue
            keys = list(coll.keys()) if isinstance(coll, dict) else list(coll)
            if not keys or not all(isinstance(k, str) for k in keys):
                continue
            if seen <= set(keys):
                if isinstance(coll, dict):
                    return {"v": keys, "w": [float(coll[k]) for k in keys]}
                return {"v": keys}
    return None


def table(locale):
    fake = Faker(locale)
    fake.seed_instance(0)
    out = {"locale": locale}
    for field, candidates in FIELDS.items():
        try:
            draw = getattr(fake, field)
        except AttributeError:
            out[field] = None
            continue
        probe = [draw() for _ in range(PROBE)]
        out[field] = exact_list(fake, probe, candidates) or {"v": probe[:POOL]}
    return out


def dedup(tables):
    """Replaces each list written before by a reference to its first place."""
    first = {}
    for t in tables:
        for field in FIELDS:
            if t[field] is None:
                continue
            key = json.dumps(t[field], sort_keys=True)
            if key in first:
                t[field] = {"ref": first[key]}
            else:
                first[key] = f"{t['locale']}/{field}"
    return tables


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "src/generate/assets/faker_locales.jsonl.gz"
    tables = dedup([table(locale) for locale in AVAILABLE_LOCALES])
    lines = "".join(
        json.dumps(t, ensure_ascii=False, separators=(",", ":")) + "\n" for t in tables
    )
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
        gz.write(lines.encode("utf-8"))
    with open(path, "wb") as f:
        f.write(buf.getvalue())


if __name__ == "__main__":
    main()
