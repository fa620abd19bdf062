"""`explain(format="dot")`: the plan as a Graphviz picture (runtime/explain_dot.py).

Graphviz's `dot` is not installed on the test machines, so the DOT text is checked by a
small parser of its own (`parse_dot`): strings are terminated and their escapes legal,
braces balance, every edge endpoint is a declared node, and the clusters are the plan's
fused regions. The labels carry what the text explain says (ids, op counts, costs, arms,
argument and result types)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

import fusebind as fb
from fusebind.compiler.cost import CostEstimate as Cost
from fusebind.compiler.decisions import Decision
from fusebind.runtime.arms import RegionDecision
from fusebind.runtime.explain_dot import _not_fused, _region_style, quote

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->)|(?P<punct>[{}\[\];=,])|(?P<id>[A-Za-z_][\w.]*|-?\d+(?:\.\d+)?))',
                    re.S)


def tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m is not None, f"not DOT at {pos}: {text[pos:pos + 40]!r}"
        kind = m.lastgroup
        out.append((kind, m.group(kind)))  # type: ignore[arg-type]
        pos = m.end()
    return out


def unquote(s: str) -> str:
    assert s[0] == s[-1] == '"'
    body = s[1:-1]
    assert not re.search(r'(?<!\\)(?:\\\\)*"', body), s  # every quote inside is escaped
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), body)


def parse_dot(text: str) -> dict:
    """Nodes (id -> attrs), edges, clusters (name -> (attrs, node ids)) of one digraph."""
    toks = tokens(text)
    assert toks[0] == ("id", "digraph") and toks[1][0] in ("str", "id") and toks[2] == ("punct", "{")
    depth, nodes, edges, clusters, stack = 0, {}, [], {}, []
    i = 2
    while i < len(toks):
        kind, val = toks[i]
        if val == "{":
            depth += 1
        elif val == "}":
            depth -= 1
            assert depth >= 0, "unbalanced braces"
            if stack and stack[-1][1] == depth:
                stack.pop()
        elif val == "subgraph":
            name = toks[i + 1][1]
            assert toks[i + 2][1] == "{"
            clusters[name] = ({}, [])
            stack.append((name, depth))
            i += 1
        elif kind == "id" and i + 1 < len(toks) and toks[i + 1][0] == "arrow":
            edges.append((val, toks[i + 2][1]))
            i += 2
        elif kind == "id" and val not in ("graph", "node", "edge") and toks[i + 1][1] == "[":
            attrs, j = {}, i + 2
            while toks[j][1] != "]":
                key, eq, value = toks[j], toks[j + 1], toks[j + 2]
                assert eq[1] == "=", (val, key, eq)
                attrs[key[1]] = unquote(value[1]) if value[0] == "str" else value[1]
                j += 3
                if toks[j][1] == ",":
                    j += 1
            nodes[val] = attrs
            if stack:
                clusters[stack[-1][0]][1].append(val)
            i = j
        elif kind == "id" and stack and toks[i + 1][1] == "=" and toks[i - 1][1] in ("{", ";"):
            value = toks[i + 2]
            clusters[stack[-1][0]][0][val] = unquote(value[1]) if value[0] == "str" else value[1]
            i += 2
        i += 1
    assert depth == 0, "unbalanced braces"
    for a, b in edges:
        assert a in nodes and b in nodes, (a, b)
    return {"nodes": nodes, "edges": edges, "clusters": clusters}


def mlp(x, w, b):
    h = np.tanh(x @ w + b)
    return h * 2.0, np.exp(h - h.max(axis=1, keepdims=True)).sum(axis=1)


X = np.linspace(-1, 1, 8 * 16, dtype=np.float32).reshape(8, 16)
W = np.linspace(-0.5, 0.5, 16 * 16, dtype=np.float32).reshape(16, 16)
B = np.linspace(0, 1, 16, dtype=np.float32)


def test_quote_escapes_quotes_backslashes_and_line_breaks() -> None:
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert quote("\\N") == '"\\\\N"'  # shown as written, not Graphviz's node-name escape
    assert unquote(quote('say "hi"\\n\nok')) == 'say "hi"\\n\nok'


def test_jit_dot_draws_regions_inputs_outputs_and_edges() -> None:
    f = fb.jit(mlp)
    want = mlp(X, W, B)
    got = f(X, W, B)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    text = f.explain(X, W, B, format="dot")
    g = parse_dot(text)
    ex = f.executor(X, W, B)
    plan = ex.plan_for([X, W, B])
    regions = [c for c in g["clusters"] if c.startswith("cluster_region_")]
    assert len(regions) == len(plan.decisions) >= 1
    for (name, (attrs, members)), d in zip(g["clusters"].items(), plan.decisions):
        label = attrs["label"]
        assert label.startswith(f"@{d.name} (FusedOpId {d.fused_id}): {len(d.ops)} ops\n"), label
        assert "fused arm: " in label and " flop, " in label and "arm 0: " in label
        assert f"chosen: {d.arm}" in label
        assert len(members) == len(d.ops)  # one node per op of the region's body
    nodes = g["nodes"]
    assert nodes["arg0"]["label"] == "x\nfloat32[8,16]" and nodes["arg0"]["shape"] == "invhouse"
    assert nodes["arg2"]["label"] == "b\nfloat32[16]"
    assert nodes["out0"]["label"] == "return #0\nfloat32[8,16]"
    assert nodes["out1"]["label"] == "return #1\nfloat32[8]"
    assert sum(a["label"] == "prim.constant 2\nfloat32[]" for a in nodes.values()) == 1  # h * 2.0, with its value
    matmul = [n for n, a in nodes.items() if a["label"].startswith("prim.matmul\n")]
    assert len(matmul) == 1 and ("arg0", matmul[0]) in g["edges"] and ("arg1", matmul[0]) in g["edges"]
    assert all(any(e[1] == f"out{i}" for e in g["edges"]) for i in range(2))
    # the same picture from the executor and from fb.compile's result
    assert ex.explain([X, W, B], format="dot") == text


def test_compile_dot_and_a_bad_format() -> None:
    text = """func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = prim.exp %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %y = prim.mul %e, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}"""
    c = fb.compile(text)
    x = np.linspace(0, 1, 32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_allclose(c(x), np.exp(x) * x, rtol=1e-6)
    g = parse_dot(c.explain(x, format="dot"))
    assert g["nodes"]["arg0"]["label"] == "x\nfloat32[4,8]"
    assert len([c for c in g["clusters"] if c.startswith("cluster_region_")]) == 1
    with pytest.raises(fb.FusebindValueError, match=r"explain\(format='svg'\): the formats are 'text' and 'dot'"):
        c.explain(x, format="svg")


def test_arm0_region_is_dashed_with_its_reason() -> None:
    d = RegionDecision("r", 7, ["prim.exp"], Cost(10.0, 8.0, 100.0, "composed"), Cost(10.0, 8.0, 200.0, "composed"),
                       "arm 0", "fused arm is not cheaper than its primitives")
    style = _region_style(SimpleNamespace(region_name="r"), d)
    assert "style=dashed;" in style
    assert "chosen: arm 0 -- fused arm is not cheaper than its primitives" in unquote(style.split("; ")[0][6:])


def test_gated_rejected_and_pending_candidates_are_dashed_notes() -> None:
    gated = Decision("gated", "rule", "g1", "f", ("prim.add", "prim.exp"), fused_id=65600, detail="queued")
    bad = Decision("illegal", "rule", "r1", "f", ("prim.add",), detail='non-convex: "a" path')
    ex = SimpleNamespace(decisions=[gated, bad, Decision("fused", "rule", "ok", "f", ("prim.mul",))])
    lines = _not_fused(ex, SimpleNamespace(pending=["g1", "late"]))
    g = parse_dot("digraph g {\n" + "\n".join(lines) + "\n}\n")
    labels = {n: a["label"] for n, a in g["nodes"].items()}
    assert all(a["style"] == "dashed" and a["shape"] == "note" for a in g["nodes"].values())
    assert labels == {
        "cand0": "gated @g1 (FusedOpId 65600): no kernel on 'cpu' yet\nqueued\n2 ops: prim.add, prim.exp",
        "cand1": 'rejected @r1 (illegal)\nnon-convex: "a" path\n1 ops: prim.add',
        "pending0": "gated @late: not fused yet\nits ops run as primitives",
    }
