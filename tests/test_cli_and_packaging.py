"""The sanity CLI's contract (exit codes, JSON), the environment file, and the bench harness helpers."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import tomllib
import torch
import yaml

from replayssm_ref import advance_write_pos
from replayssm_ref.__main__ import main
from replayssm_ref.traffic import TrafficShape, model_speedup, replay_cycle_bytes_per_row, standard_bytes_per_row

ROOT = Path(__file__).resolve().parent.parent


def test_cli_passes_and_prints_a_table(capsys):
    assert main(["--cache-lengths", "1", "3", "--heads", "1/1", "2/4", "--steps", "5"]) == 0
    text = capsys.readouterr().out
    assert "all 12 cases passed" in text and "B4-H2-HV4-K16-V32-L3" in text


def test_cli_json_output(capsys):
    assert main(["--cache-lengths", "2", "--heads", "1/2", "--dtypes", "float64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["passed"] and doc["cases"][0]["max_out_rel"] < 1e-12 and doc["cases"][0]["natural_flushes"] > 0


@pytest.mark.parametrize(
    "argv", [["--heads", "3/4"], ["--cache-lengths", "0"], ["--dims", "12x16"], ["--device", "nope"]]
)
def test_cli_bad_arguments_exit_2(argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2


def test_cli_reports_failure_with_exit_1(monkeypatch, capsys):
    import replayssm_ref.__main__ as cli

    monkeypatch.setattr(cli, "case_tolerance", lambda name, steps: 0.0)  # no float32 run is exact: must fail
    assert main(["--cache-lengths", "2", "--heads", "1/1", "--dtypes", "float32"]) == 1
    assert "FAILED" in capsys.readouterr().out


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower()


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    env_names = {_name(r) for r in pip if not r.startswith("-e")}
    assert any(r.startswith("-e .[") for r in pip)
    proj = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in proj["dependencies"]}
    for extra in ("notebook", "dev"):
        wanted |= {_name(r) for r in proj["optional-dependencies"][extra]}
    assert env_names == wanted


def test_bench_cursor_schedule_is_what_advance_write_pos_gives():
    from replayssm_kernels.tools.bench import cursor_schedule

    for L, seed in itertools.product((1, 3, 8), (None, 0)):
        sched = cursor_schedule(10, L, "cpu", seed)
        wp = sched[0].clone()
        for t in range(1, L):
            advance_write_pos(wp, L)
            assert torch.equal(wp, sched[t])
        # every row visits every cursor once per cycle, so natural flushes are spread over the steps
        assert sorted(torch.stack(sched)[:, 0].tolist()) == list(range(L))
        assert (torch.stack(sched) == L - 1).sum(0).tolist() == [1] * 10
        # shuffled, the same cursors in another row order: the same number of flushes every step
        regular = cursor_schedule(10, L, "cpu")
        assert [sorted(w.tolist()) for w in sched] == [sorted(w.tolist()) for w in regular]
    assert not torch.equal(cursor_schedule(64, 16, "cpu", 0)[0], cursor_schedule(64, 16, "cpu")[0])


def test_bench_plan_is_the_ordered_union_of_its_groups():
    from replayssm_kernels.tools.bench import Case, build_cases, parse_args

    plan = ROOT / "replayssm_kernels/sweeps/full.json"
    cases = build_cases(parse_args(["--plan", str(plan), "--out", "unused"]))
    assert len(cases) == len(set(cases))  # a case in two groups is timed once
    assert cases[0] == Case(256, 32, 32, 128, 128, 4, "float32", "bfloat16")  # the regime first
    assert {c.batch for c in cases[:48]} == {1, 8, 64, 256} and {c.cache_length for c in cases[:48]} == {4, 8, 16}
    assert {c.cache_length for c in cases if c.batch == 256 and c.num_v_heads == 32} == {1, 2, 4, 8, 16, 32, 64}
    assert {c.batch for c in cases} == {1, 8, 64, 256} and {c.num_v_heads for c in cases} == {8, 16, 32, 64}
    assert any(c.num_q_heads * 2 == c.num_v_heads for c in cases) and any(c.key_dim == 64 for c in cases)
    # without a plan, the grid options' cross product, as before
    grid = build_cases(
        parse_args(["--batch", "8", "--heads", "4", "--gqa", "1", "2", "--cache-lengths", "2", "--out", "unused"])
    )
    assert len(grid) == 2 * 3 and {c.num_q_heads for c in grid} == {4, 2}


def test_traffic_model_matches_the_design_doc_table():
    fp32 = TrafficShape(32, 32, 128, 128, state_bytes=4)
    bf16 = TrafficShape(32, 32, 128, 128, state_bytes=2)
    assert [round(model_speedup(fp32, L), 2) for L in (4, 8, 16)] == [1.56, 1.68, 1.67]
    assert [round(model_speedup(bf16, L), 2) for L in (4, 8, 16)] == [1.51, 1.59, 1.51]
    assert replay_cycle_bytes_per_row(fp32, 1) == pytest.approx(standard_bytes_per_row(fp32))


def _bench_csv(path: Path) -> Path:
    """A small synthetic sweep in the benchmark's columns (tests check code, not past measurements)."""
    from replayssm_kernels.tools.bench import CSV_COLUMNS

    rows = []
    for batch, sd in itertools.product((8, 256), ("float32", "bfloat16")):
        base = {"batch": batch, "num_q_heads": 32, "num_v_heads": 32, "key_dim": 128, "value_dim": 128,
                "state_dtype": sd, "copy_gbps": 3000.0, "device": "Test GPU", "model_bytes_per_step": 1.0}  # fmt: skip
        for impl, us in (("standard_helion", 100.0), ("fla_fused_recurrent", 120.0)):
            rows.append(base | {"impl": impl, "cache_length": 0, "cache_dtype": "", "us_per_step": us,
                                "frac_of_copy": 0.9})  # fmt: skip
        for L in (1, 4, 8, 16):
            rows.append(base | {"impl": "replayssm_helion", "cache_length": L, "cache_dtype": "bfloat16",
                                "us_per_step": 100.0 - L, "frac_of_copy": 0.5 + L / 100})  # fmt: skip
            rows.append(base | {"impl": "sglang_helion_replayssm", "cache_length": L, "cache_dtype": "bfloat16",
                                "ring_format": "raw", "us_per_step": 110.0 - L, "frac_of_copy": 0.5})  # fmt: skip
            if L == 8:  # a deleted format's row (bf16_gate): kept in the CSV, never drawn
                rows.append(base | {"impl": "replayssm_helion", "cache_length": L, "cache_dtype": "bfloat16",
                                    "ring_format": "bf16_gate", "us_per_step": 1.0, "frac_of_copy": 0.9})  # fmt: skip
            if batch == 256 and sd == "float32" and L > 1:  # a faster format at one point
                rows.append(base | {"impl": "replayssm_helion", "cache_length": L, "cache_dtype": "bfloat16",
                                    "ring_format": "predecayed", "us_per_step": 90.0 - 2 * L,
                                    "frac_of_copy": 0.7})  # fmt: skip
    for row in list(rows):  # Gated DeltaNet at its headline heads, our rows twice as fast
        if row["impl"] in ("replayssm_helion", "standard_helion") and row.get("ring_format") != "predecayed":
            fast = 0.5 if row["impl"] == "replayssm_helion" else 1.0
            rows.append(row | {"gate": "gdn", "num_q_heads": 16, "us_per_step": row["us_per_step"] * fast})
    path.parent.mkdir(parents=True)
    pd.DataFrame(rows).reindex(columns=CSV_COLUMNS).to_csv(path, index=False)
    (path.parent / "env.json").write_text(json.dumps({"gpu": "Test GPU", "git_sha": "abcdef0", "utc_time": "x"}))
    return path


def test_plots_and_tables_from_a_sweep(tmp_path):
    from replayssm_kernels.tools import plots

    csv = _bench_csv(tmp_path / "test_gpu" / "bench" / "decode_throughput.csv")
    df = plots.load_bench(csv)
    assert plots.gpu_name(csv) == "Test GPU"
    figs = [plots.plot_speedup(df, "Test GPU", tmp_path / "s.png"), plots.plot_bandwidth(df, "Test GPU")]
    for fig in [*figs, plots.plot_regime(df, "Test GPU")]:
        assert "Test GPU" in fig._suptitle.get_text() and len(fig.axes) <= 4  # regime: 2 panels, 2 colour bars
    assert (tmp_path / "s.png").stat().st_size > 0
    assert set(df[df.impl == "replayssm_helion"].ring_format) == {"raw", "predecayed"}  # empty -> raw
    table = plots.headline_markdown(df)
    # best (L, format) at batch 256; the peer at its own best L; the model limit of the row's format
    assert "| float32 | L=16, predecayed | 58.0 | 100.0 | 120.0 | 1.72 | 2.07 | 94.0 (L=16) | – | 70% | 1.75 |" in table
    assert "| bfloat16 | L=16, raw | 84.0 | 100.0 | 120.0 | 1.19 | 1.43 | 94.0 (L=16) | – | 66% | 1.51 |" in table
    assert "| 8 | L=16, raw, 1.19× | L=16, raw, 1.19× |" in plots.batches_markdown(df)
    assert plots.gates_of(df) == ["kda", "gdn"]  # rows without a gate are KDA's
    gdn = plots.headline_markdown(df, "gdn")  # GDN: its own heads (16/32), raw rings, no FLA or peer rows here
    assert "| float32 | L=16, raw | 42.0 | 100.0 | – | 2.38 | – | – | – | 66% | 1.80 |" in gdn
    fig = plots.plot_speedup(df, "Test GPU", gate="gdn")
    assert "Gated DeltaNet, H=16, HV=32" in fig._suptitle.get_text()
    text = plots.replace_block("a\n<!-- results:begin -->\nold\n<!-- results:end -->\nb", "new")
    assert text == "a\n<!-- results:begin -->\nnew\n<!-- results:end -->\nb"


def test_plots_take_the_default_design_the_table_picks_now():
    """Where the GPU's table now runs one launch (H100: predecayed up to L = 8, GDN at batch 1), the
    sweep's one-launch row is ours and the row timed as the default then is ``replayssm_helion_multi``;
    elsewhere both rows stay what they were."""
    from replayssm_kernels.configs import one_launch_rule
    from replayssm_kernels.tools import plots

    up_to_l, _ = one_launch_rule("nvidia_h100_80gb_hbm3")
    base = {"gate": "kda", "batch": 256, "num_q_heads": 32, "num_v_heads": 32, "key_dim": 128, "value_dim": 128,
            "state_dtype": "float32", "cache_dtype": "bfloat16", "ring_format": "predecayed",
            "device": "NVIDIA H100 80GB HBM3"}  # fmt: skip
    timed = (("replayssm_helion", 100.0), ("replayssm_helion_fused", 90.0))
    rows = [base | {"impl": i, "cache_length": L, "us_per_step": us} for L in (up_to_l, 2 * up_to_l) for i, us in timed]
    df = plots.as_default_design(pd.DataFrame(rows))
    got = {(r.impl, r.cache_length): r.us_per_step for r in df.itertuples()}
    assert got == {
        ("replayssm_helion_multi", up_to_l): 100.0, ("replayssm_helion", up_to_l): 90.0,
        ("replayssm_helion", 2 * up_to_l): 100.0, ("replayssm_helion_fused", 2 * up_to_l): 90.0,
    }  # fmt: skip
    table = plots.designs_markdown(df)  # one launch against two or three wherever both were timed
    for L in (up_to_l, 2 * up_to_l):
        assert f"| kda | 256 | float32 | {L} | predecayed | 100.0 | 90.0 | 0.90 |" in table


def test_readme_usage_example_runs():
    text = (ROOT / "README.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert torch.isfinite(namespace["out"]).all() and (namespace["cache"].write_pos < 8).all()


def test_readme_and_notes_are_small_and_name_only_paths_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.encode()) <= 12 * 1024
    for doc in (readme, (ROOT / "docs/design.md").read_text()):
        for path in re.findall(r"\]\(([^)#:]+)\)", doc) + re.findall(
            r"`((?:results|docs|notebooks|scripts|tests|"
            r"replayssm_\w+)/[\w./<>-]*)`",
            doc,
        ):
            if "<" not in path:
                assert (ROOT / path).exists(), path


def test_results_hold_no_code():
    code = [p for p in (ROOT / "results").rglob("*") if p.suffix in {".py", ".sh", ".ipynb"}]
    assert not code


@pytest.mark.parametrize("table", sorted((ROOT / "replayssm_kernels/configs").glob("*.json")), ids=lambda p: p.stem)
def test_config_tables_load_and_name_their_origin(table):
    """Every entry splits into a Helion config and typed kernel options (read_table checks each; an
    unknown or conflicting option is a ValueError naming it), and the file says in one line what
    tuned it."""
    from replayssm_kernels.configs import read_table

    doc = read_table(table.stem)
    assert doc["device"] and doc["tuned_by"] and "\n" not in doc["tuned_by"] and len(doc["tuned_by"]) < 300


def test_options_reject_unknown_and_conflicting_fields():
    from replayssm_kernels.options import split_entry

    with pytest.raises(ValueError, match="unknown field.*flush_dot"):
        split_entry("replayssm", {"block_sizes": [64, 32], "flush_dot": "tf32"}, (128, 128))
    with pytest.raises(ValueError, match="flush_overlap"):
        split_entry("replayssm_split", {"flush_overlap": 1}, (128, 128))
    with pytest.raises(ValueError, match="standard kernel takes no kernel options"):
        split_entry("standard", {"block_sizes": [64], "k_stages": 2}, (128,))
    entry = split_entry("replayssm", {"block_sizes": [256, 256], "num_warps": 2, "k_stages": 3}, (128, 64))
    assert entry.config.block_sizes == [128, 64] and entry.options.k_stages == 3


@pytest.mark.parametrize("tool", ["bench", "spec_bench", "tune", "gpu_check", "profile", "codegen", "ceiling", "plots"])
def test_every_tool_is_a_documented_command(tool, capsys):
    """Each measuring tool is ``python -m replayssm_kernels.tools.<tool>`` and every option has help."""
    import importlib

    module = importlib.import_module(f"replayssm_kernels.tools.{tool}")
    with pytest.raises(SystemExit) as e:
        module.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and f"replayssm_kernels.tools.{tool}" in out
    import ast

    for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            assert any(k.arg == "help" for k in node.keywords), f"{tool}: {ast.unparse(node)[:80]} has no help"


def test_cli_options_all_have_help():
    import replayssm_ref.__main__ as cli

    with pytest.raises(SystemExit):
        cli.parse_args(["--help"])


def test_no_import_cycles_between_kernel_modules():
    """configs/options know nothing of the kernels; kernels/ knows nothing of plan, decode or tools."""
    import ast

    pkg = ROOT / "replayssm_kernels"
    forbidden = {
        "configs.py": ("plan", "decode", "kernels", "tools"), "options.py": ("plan", "decode", "kernels", "tools"),
        "kernels": ("plan", "decode", "tools", "configs"), "plan.py": ("decode", "tools"),
    }  # fmt: skip
    for where, names in forbidden.items():
        for path in [pkg / where] if where.endswith(".py") else sorted((pkg / where).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    parts = node.module.split(".")
                    assert not set(parts) & set(names), (path.name, node.module)


def test_pipelining_options_land_on_their_loops():
    """``k_stages``, ``flush_k_stages`` and ``prep_stages`` pipeline the loops they name and no other
    (positions in Helion's ``range_num_stages``: plan._state_configs), in the generated Triton code.
    In a subprocess without the interpreters' variables: under them Helion generates no Triton."""
    script = """
import json, re, torch
from replayssm_kernels.tools.codegen import generated_source
def stages(kernel, options, **kw):
    source, *_ = generated_source(kernel, 16, 64, 2, torch.float32, options, 32, **kw)
    loops = re.findall(r"for \\w+ in tl\\.range\\(([^\\n]*)\\):", source)
    return [int(m.group(1)) if (m := re.search(r"num_stages=(\\d+)", loop)) else 0 for loop in loops]
tiles = {"flush_tiles": 16, "flush_weights": 1, "flush_block_k": 16}
print(json.dumps([stages("state", {"k_stages": 3, "flush_k_stages": 2, **tiles}),
                  stages("state_split", {"k_stages": 3}),
                  stages("ring_weights", {"prep_stages": 3, "ring_chunk": 4}),
                  stages("fused", {"k_stages": 3}, gate="gdn"),
                  stages("fused", {"k_stages": 3}, ring_format="predecayed")]))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("HELION_INTERPRET", "TRITON_INTERPRET")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    two_launch, split, ring_weights, fused_gdn, fused_predecayed = json.loads(out.stdout.strip().splitlines()[-1])
    assert two_launch == [3, 2, 0, 0]  # [K chunks, flush K steps, flush ring tiles, append]
    assert split == [3, 0]  # [K chunks, append]
    assert ring_weights == [3, 0]  # [ring chunks, append]
    assert fused_gdn == fused_predecayed == [3, 0, 0, 0]  # [K chunks, flush K steps, flush ring, append]


@pytest.mark.skipif(os.environ.get("HELION_INTERPRET") != "1", reason="runs the kernels: needs HELION_INTERPRET=1")
@pytest.mark.parametrize("gate", ["kda", "gdn"])
def test_bench_steps_run_for_each_gate(gate):
    """The benchmark's own calls (our ReplaySSM and standard decode), built as the sweep builds them,
    run on a tiny case of each gate; a GDN plan group is timed as GDN cases."""
    from replayssm_kernels.tools.bench import Case, Workload, build_cases, parse_args, runs_of

    case = Case(2, 1, 2, 16, 16, 4, "float32", "bfloat16", gate)
    work = Workload(case, sets=2, device="cpu")
    args = parse_args(["--out", "unused", "--ring-formats", "raw", "predecayed", "--impls", "replayssm_helion",
                       "standard_helion", "sglang_helion_replayssm"])  # fmt: skip
    runs = runs_of(case, args, {"sglang_helion_replayssm": lambda *a: None})
    if gate == "gdn":  # raw rings only, and sglang's Helion peer is a KDA kernel
        assert runs == [("replayssm_helion", "raw"), ("standard_helion", "")]
    else:
        assert ("replayssm_helion", "predecayed") in runs and ("sglang_helion_replayssm", "raw") in runs
    lower_bound = -5.0 if gate == "kda" else None
    for impl in ("replayssm_helion", "standard_helion"):
        before = work.state.clone()
        for step in work.steps(impl, lower_bound=lower_bound)[: case.cache_length]:  # a cycle: flushes too
            step()
        assert torch.isfinite(work.out).all() and not torch.equal(work.state, before)
        assert len(work.plan(impl, lower_bound=lower_bound)) >= 1
    plan = ROOT / "replayssm_kernels/sweeps/full.json"
    cases = build_cases(parse_args(["--plan", str(plan), "--out", "unused"]))
    gdn = [c for c in cases if c.gate == "gdn"]
    assert {c.batch for c in gdn} == {1, 8, 64, 256} and {(c.num_q_heads, c.num_v_heads) for c in gdn} == {
        (16, 32),
        (32, 32),
    }


@pytest.mark.skipif(os.environ.get("HELION_INTERPRET") != "1", reason="runs the kernels: needs HELION_INTERPRET=1")
@pytest.mark.parametrize("tree", [False, True], ids=["chain", "tree"])
def test_spec_bench_rounds_run_and_keep_the_contract(tree):
    """The spec benchmark's own rounds (ours and the snapshot baseline) on a tiny case: accept counts
    within the tree's depth, cursors within the ring, and the bytes model's ReplaySSM below snapshots."""
    from replayssm_kernels.tools.spec_bench import SpecWorkload, tree_depth
    from replayssm_ref.traffic import TrafficShape, spec_round_bytes

    work = SpecWorkload(2, 4, tree, "float32", 6, sets=2, rounds=3, rate=0.6, device="cpu", heads=2, dim=16)
    assert int(work.accepts.max()) <= (tree_depth(work.parents[0]) if tree else 4)
    for impl in ("replayssm_spec", "snapshot_spec"):
        for fn in work.round_fns(impl):
            fn()
        assert torch.isfinite(work.state).all() and torch.isfinite(work.out.float()).all()
    assert all(((wp >= 0) & (wp + 4 <= 6)).all() for wp in work.write_pos)
    model = spec_round_bytes(TrafficShape(32, 32, 128, 128), 16, 4, work.accepts.T.tolist())
    assert model["replayssm"] < model["snapshot"] / 2
