#!/usr/bin/env python3
"""Read an .xlsx with openpyxl, independently of excelize, and print its cells as JSON.

    python3 readback.py FILE.xlsx [read_only|normal]

Output:

    {"properties": {"title": ..., "creator": ..., "created": ..., "modified": ...,
                    "application": ...},
     "sheets": [{"name": ..., "max_row": N, "max_column": N,
                 "header": [CELL, ...], "rows": [[CELL, ...], ...],
                 "formats": [[FORMAT, ...], ...]}]}

The file is read the way a streaming reader reads it: openpyxl's read-only mode,
trusting each sheet's <dimension> (no reset_dimensions()), so "max_row" and
"max_column" are what the file declares, and a wrong dimension loses or invents cells.
With "normal" it is loaded whole instead, as openpyxl does by default, and "max_row"
and "max_column" are the cells found.
"header" is the sheet's first row, "rows" the rest, "formats" every row's number
formats (the header's first), and each CELL is [type, value]:

    ["n", 12] or ["n", 1.5]      a number (an int when the file holds no fraction)
    ["s", "text"]                text (shared, inline or a formula's cached string)
    ["b", true]                  a boolean
    ["d", "2024-05-06T07:08:09"] a number formatted as a date: its date and time,
                                 to the millisecond as openpyxl reads it, no zone
    ["f", "=SUM(A1:A2)"]         a formula: the file would compute this cell
    ["e", "#N/A"]                an error value
    ["empty", null]              no value

Every row is padded with empty cells to the sheet's widest row, so that a missing
trailing cell reads as empty.
"""

import datetime
import json
import sys
import zipfile
from xml.etree import ElementTree

import openpyxl


def cell(c):
    v = c.value
    if v is None:
        return ["empty", None]
    t = c.data_type
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return ["d", v.isoformat()]
    if isinstance(v, datetime.timedelta):
        return ["d", str(v)]
    if t == "n":
        return ["n", v]
    if t == "s":
        return ["s", v]
    if t == "b":
        return ["b", bool(v)]
    if t == "f":
        return ["f", v]
    if t == "e":
        return ["e", v]
    return [t, str(v)]


def stamp(t):
    return t.isoformat() if t is not None else None


def application(path):
    """docProps/app.xml's Application, which openpyxl does not read."""
    ns = "{http://schemas.openxmlformats.org/officeDocument/2006/extended-properties}"
    with zipfile.ZipFile(path) as z:
        try:
            root = ElementTree.fromstring(z.read("docProps/app.xml"))
        except KeyError:
            return None
    el = root.find(ns + "Application")
    return el.text if el is not None else None


def main(path, mode="read_only"):
    # read_only is the streaming reader a large export needs; data_only=False so a
    # formula shows as a formula ("f"), not as its cached value.
    wb = openpyxl.load_workbook(path, read_only=(mode != "normal"), data_only=False)
    p = wb.properties
    out = {
        "properties": {
            "title": p.title,
            "creator": p.creator,
            "created": stamp(p.created),
            "modified": stamp(p.modified),
            "application": application(path),
        },
        "sheets": [],
    }
    for ws in wb.worksheets:
        rows, formats = [], []
        for row in ws.iter_rows():
            rows.append([cell(c) for c in row])
            formats.append([c.number_format or "General" for c in row])
        width = max((len(r) for r in rows), default=0)
        for r, f in zip(rows, formats):
            r.extend([["empty", None]] * (width - len(r)))
            f.extend(["General"] * (width - len(f)))
        out["sheets"].append({
            "name": ws.title,
            "max_row": ws.max_row,
            "max_column": ws.max_column,
            "header": rows[0] if rows else [],
            "rows": rows[1:],
            "formats": formats,
        })
    wb.close()
    json.dump(out, sys.stdout, ensure_ascii=False, allow_nan=False)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3) or sys.argv[2:] not in ([], ["read_only"], ["normal"]):
        sys.exit("usage: readback.py FILE.xlsx [read_only|normal]")
    main(*sys.argv[1:])
