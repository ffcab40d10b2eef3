#!/usr/bin/env python3
"""Read an .xlsx with openpyxl, independently of excelize, and print its cells as JSON.

    python3 readback.py FILE.xlsx

Output: {"sheets": [{"name": ..., "header": [CELL, ...], "rows": [[CELL, ...], ...]}]}
where "header" is the sheet's first row, "rows" the rest, and each CELL is
[type, value]:

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


def main(path):
    # read_only is the streaming reader a large export needs; data_only=False so a
    # formula shows as a formula ("f"), not as its cached value.
    wb = openpyxl.load_workbook(path, read_only=True, data_only=False)
    out = {"sheets": []}
    for ws in wb.worksheets:
        # A stream writer states its dimension before it knows it ("A1"), and a
        # read-only sheet would believe it and stop after the first cell.
        ws.reset_dimensions()
        rows = [[cell(c) for c in row] for row in ws.iter_rows()]
        width = max((len(r) for r in rows), default=0)
        for r in rows:
            r.extend([["empty", None]] * (width - len(r)))
        out["sheets"].append({
            "name": ws.title,
            "header": rows[0] if rows else [],
            "rows": rows[1:],
        })
    wb.close()
    json.dump(out, sys.stdout, ensure_ascii=False, allow_nan=False)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: readback.py FILE.xlsx")
    main(sys.argv[1])
