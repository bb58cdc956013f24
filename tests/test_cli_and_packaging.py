"""The sanity CLI's contract (exit codes, JSON), the environment file, and the bench harness helpers."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

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

    monkeypatch.setitem(cli.TOLERANCES, "float32", 0.0)  # no float32 run is exact: must fail
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
    from replayssm_kernels.bench import cursor_schedule

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
    from replayssm_kernels.bench import Case, build_cases, parse_args

    plan = ROOT / "replayssm_kernels/sweeps/full.json"
    cases = build_cases(parse_args(["--plan", str(plan)]))
    assert len(cases) == len(set(cases))  # a case in two groups is timed once
    assert cases[0] == Case(256, 32, 32, 128, 128, 1, "float32", "bfloat16")  # the headline first
    assert {c.cache_length for c in cases if c.batch == 256 and c.num_v_heads == 32} == {1, 2, 4, 8, 16, 32, 64}
    assert {c.batch for c in cases} == {1, 8, 64, 256} and {c.num_v_heads for c in cases} == {8, 16, 32, 64}
    assert any(c.num_q_heads * 2 == c.num_v_heads for c in cases) and any(c.key_dim == 64 for c in cases)
    # without a plan, the grid options' cross product, as before
    grid = build_cases(parse_args(["--batch", "8", "--heads", "4", "--gqa", "1", "2", "--cache-lengths", "2"]))
    assert len(grid) == 2 * 3 and {c.num_q_heads for c in grid} == {4, 2}


def test_traffic_model_matches_the_design_doc_table():
    fp32 = TrafficShape(32, 32, 128, 128, state_bytes=4)
    bf16 = TrafficShape(32, 32, 128, 128, state_bytes=2)
    assert [round(model_speedup(fp32, L), 2) for L in (4, 8, 16)] == [1.56, 1.68, 1.67]
    assert [round(model_speedup(bf16, L), 2) for L in (4, 8, 16)] == [1.51, 1.59, 1.51]
    assert replay_cycle_bytes_per_row(fp32, 1) == pytest.approx(standard_bytes_per_row(fp32))


def test_plots_render_from_the_committed_csvs(tmp_path):
    from replayssm_kernels import plots

    readme = tmp_path / "README.md"
    blocks = ("SUMMARY", "HEADLINE", "SHAPES", "ERRORS", "LAUNCHES")
    readme.write_text("".join(f"<!-- BEGIN {b} -->\n<!-- END {b} -->\n" for b in blocks))
    bench = tmp_path / "bench.csv"
    bench.write_bytes(plots.BENCH_CSV.read_bytes())
    errors = tmp_path / "errors.csv"
    errors.write_bytes(plots.ERRORS_CSV.read_bytes())
    launches = tmp_path / "launches.csv"
    launches.write_bytes(plots.LAUNCHES_CSV.read_bytes())
    argv = ["--bench-csv", str(bench), "--errors-csv", str(errors), "--launches-csv", str(launches)]
    assert plots.main([*argv, "--readme", str(readme)]) == 0
    assert (tmp_path / "speedup.png").stat().st_size > 10_000
    text = readme.read_text()
    assert "| float32 / bfloat16 | 4 |" in text and "ReplaySSM µs" in text and "runs within tolerance" in text
    assert "| replayssm_helion | 16 |" in text and "revision unknown" in text  # no env.json beside the copies


def test_plots_fill_another_gpus_set_under_its_own_blocks(tmp_path):
    """``--tag H100`` writes the ``..._H100`` blocks and leaves the H200's untouched; every other GPU's
    committed set has the three CSVs the default run reads."""
    from replayssm_kernels import plots

    readme = tmp_path / "README.md"
    blocks = ("SUMMARY", "HEADLINE", "SHAPES", "ERRORS", "LAUNCHES")
    readme.write_text("".join(f"<!-- BEGIN {b}{t} -->\n<!-- END {b}{t} -->\n" for b in blocks for t in ("", "_H100")))
    tag, bench_csv, errors_csv, launches_csv = plots.OTHER_SETS[0]
    assert bench_csv.exists() and errors_csv.exists() and launches_csv.exists()
    copies = []
    for name, src in (("bench.csv", bench_csv), ("errors.csv", errors_csv), ("launches.csv", launches_csv)):
        (tmp_path / name).write_bytes(src.read_bytes())
        copies.append(str(tmp_path / name))
    argv = ["--bench-csv", copies[0], "--errors-csv", copies[1], "--launches-csv", copies[2], "--tag", tag]
    assert plots.main([*argv, "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "<!-- BEGIN HEADLINE -->\n<!-- END HEADLINE -->" in text
    h100 = text.split("<!-- BEGIN HEADLINE_H100 -->")[1].split("<!-- END HEADLINE_H100 -->")[0]
    assert "H100" in h100 and "| float32 / bfloat16 | 16 |" in h100


def test_figures_draw_one_shape_per_line():
    """With several head counts in the sweep, no line mixes shapes (it would repeat an L) and the extra
    panel has one line per head count."""
    import matplotlib.pyplot as plt

    from replayssm_kernels import plots

    df = plots.load_bench(plots.BENCH_CSV)
    for draw in (plots.plot_time_vs_cache_length, plots.plot_speedup, plots.plot_bandwidth):
        fig = draw(df)
        for ax in fig.axes:
            for line in ax.get_lines():
                x = list(line.get_xdata())
                assert len(x) == len(set(x)), f"{draw.__name__}: {line.get_label()} repeats an L"
        plt.close(fig)
    fig = plots.plot_time_vs_cache_length(df)
    assert len(fig.axes) == df.batch.nunique() + 1
    heads = plots._by_heads(df[df.impl == "replayssm_helion"])
    n_heads = heads[heads.num_q_heads == heads.num_v_heads].num_v_heads.nunique()
    assert len(fig.axes[-1].get_legend().get_texts()) == n_heads > 1
    plt.close(fig)


def test_headline_shows_other_designs_when_timed():
    import pandas as pd

    from replayssm_kernels import plots

    df = plots.load_bench(plots.BENCH_CSV)
    default = df[df.impl == "replayssm_helion"]
    split = default.assign(impl="replayssm_helion_split", us_per_step=default.us_per_step * 2)
    text = plots.headline_markdown(pd.concat([df, split], ignore_index=True))
    assert "three launches µs" in text and "fused µs" not in text
    row = next(line for line in text.splitlines() if line.startswith("| float32 / bfloat16 | 4 |"))
    us, other_us = (float(x) for x in row.split("|")[3:5])  # the default's time, then the other design's
    assert abs(other_us - 2 * us) <= 0.15


def test_headline_names_the_design_the_run_recorded(tmp_path):
    """The headline's design sentence follows the env.json beside the CSV: a run that recorded the
    standard kernel at L = 1 (``default_launches``) says so; older runs recorded none and do not."""
    import json

    from replayssm_kernels import plots

    df = plots.load_bench(plots.BENCH_CSV)
    csv = tmp_path / "decode_throughput.csv"
    assert not plots.standard_at_l1(csv)  # no env.json
    run = {"split_flush_from_l": 32, "default_launches": {"1": 0, "2": 2, "16": 2, "32": 3}}
    (tmp_path / "env.json").write_text(json.dumps({"config": {"runs": [run]}}))
    assert plots.standard_at_l1(csv) and plots.split_from(csv) == 32
    text = plots.headline_markdown(df, split=32, standard_l1=True)
    assert "`launches=None`: the standard kernel on the checkpoint at L=1" in text and "below L=32" in text
    assert "standard kernel on the checkpoint" not in plots.headline_markdown(df)


def test_readme_usage_example_runs():
    text = (ROOT / "README.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert torch.isfinite(namespace["out"]).all() and (namespace["cache"].write_pos < 8).all()


def test_inspect_codegen_reports_registers_offline(tmp_path):
    """The offline sm_90 compile report (no GPU): the register count comes from Triton's own ptxas."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("HELION_INTERPRET", "TRITON_INTERPRET")}
    csv = tmp_path / "codegen.csv"
    argv = [sys.executable, "-m", "replayssm_kernels.inspect_codegen", "--block-v", "32", "--num-warps", "1"]
    run = subprocess.run([*argv, "--csv", str(csv)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    report = dict(item.split("=") for item in run.stdout.split())
    assert 0 < int(report["registers"]) <= 255 and int(report["spill_bytes"]) >= 0 and "bar_sync" in report
    import pandas as pd

    row = pd.read_csv(csv).iloc[0]  # the same report, as a CSV row with its command
    assert row.registers == int(report["registers"]) and "--block-v 32" in row.command
    assert (tmp_path / "env.json").exists()
    # a config's maxnreg reaches the compile (Helion passes it to the launch on a GPU): ptxas keeps under it
    cap = 32
    assert int(report["registers"]) > cap
    argv_cap = [*argv, "--config", f'{{"maxnreg": {cap}}}']
    run = subprocess.run(argv_cap, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    capped = dict(item.split("=") for item in run.stdout.split())
    assert int(capped["registers"]) <= cap, capped


def test_codegen_rows_keep_the_columns_of_their_file(tmp_path):
    """A row appended to an existing codegen CSV lands under that file's header, display options
    (``--memory-order``) are not columns, and a report whose columns differ is refused rather than
    written out of line (six rows of ``state_kernels.csv`` once carried a stray ``False``)."""
    import argparse

    from replayssm_kernels.inspect_codegen import _append_row

    csv = tmp_path / "codegen.csv"
    args = argparse.Namespace(kernel="state", block_v=64, config={"k_stages": 3}, csv=csv, dump=None)
    args.fingerprint, args.memory_order = None, True
    _append_row(args, {"registers": 96}, ["--kernel", "state"])
    args.memory_order, args.block_v = False, 32
    _append_row(args, {"registers": 80}, ["--kernel", "state", "--memory-order"])
    lines = csv.read_text().splitlines()
    assert lines[0] == "kernel,block_v,config,registers,command" and len(lines) == 3
    with pytest.raises(ValueError, match="columns"):
        _append_row(args, {"registers": 80, "spill_bytes": 0}, [])
    assert len(csv.read_text().splitlines()) == 3


def test_committed_csvs_are_rectangular():
    """Every CSV under results/ has as many fields in each row as in its header."""
    import csv

    paths = sorted((ROOT / "results").rglob("*.csv"))
    assert paths
    for path in paths:
        with path.open(newline="") as f:
            header, *rows = list(csv.reader(f))
        ragged = [i + 2 for i, row in enumerate(rows) if len(row) != len(header)]
        assert not ragged, f"{path.relative_to(ROOT)}: lines {ragged[:5]} do not have the header's {len(header)} fields"


def test_codegen_fingerprint_ignores_names_and_line_info():
    """``inspect_codegen --fingerprint`` hashes IR with its values renumbered and line info dropped, so a
    refactor that only renames or moves source lines keeps the hash, and a changed op does not."""
    from replayssm_kernels.inspect_codegen import _normalised

    ir = '%acc = arith.addf %acc_prev, %x : f32 loc(#loc3)\n#loc3 = loc("k.py":3:4)'
    renamed = "%total = arith.addf %old, %x_f : f32 loc(#loc9)"
    assert _normalised(ir, True) == _normalised(renamed, True)
    assert _normalised(ir, True) != _normalised(ir.replace("addf", "mulf"), True)
    assert _normalised("x = 1  \n    # src[k.py:3]: x = 1\n", False) == _normalised("x = 1  \n", False)


def test_codegen_fingerprint_of_a_table():
    """Every launch of every entry of a config table gets a source and an IR hash (offline compile)."""
    import os
    import re
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("HELION_INTERPRET", "TRITON_INTERPRET")}
    argv = [sys.executable, "-m", "replayssm_kernels.inspect_codegen", "--fingerprint", "default"]
    run = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = [line.split() for line in run.stdout.splitlines()[1:]]
    launches = {(key, name) for key, name, *_ in rows}
    assert ("replayssm_split/*/*", "state") in launches and ("standard/*/*", "standard") in launches
    assert len(rows) == len(launches) and all(re.fullmatch(r"[0-9a-f]{12}", h) for *_, s, t in rows for h in (s, t))
    pairs = {(s, t) for *_, s, t in rows}  # launch 1 is the same kernel in both ReplaySSM designs
    assert len(pairs) == len({s for s, _ in pairs}) == len({t for _, t in pairs}) == len(rows) - 1


# the Helion config fields the tables and run plans use (the cache hints: run 32's isolated-profile plan)
HELION_FIELDS = {
    "block_sizes", "num_warps", "num_stages", "range_num_stages", "load_eviction_policies", "store_cache_modifiers"
}  # fmt: skip


def _known_fields() -> set[str]:
    """Helion config fields the kernels set and the options of ``configs.KERNEL_OPTIONS``."""
    from replayssm_kernels.configs import KERNEL_OPTIONS

    return HELION_FIELDS | set(KERNEL_OPTIONS)


def _assert_known_fields(entry: dict, where) -> None:
    """A whole entry: only known fields, and at least its tile and warps."""
    known = _known_fields()
    assert set(entry) <= known, (where, set(entry) - known)
    assert {"block_sizes", "num_warps"} <= set(entry), where


@pytest.mark.parametrize("table", sorted((ROOT / "replayssm_kernels/configs").glob("*.json")), ids=lambda p: p.stem)
def test_config_tables_hold_only_known_fields(table):
    """Every tuned table names its device and how it was tuned, and every entry holds only Helion
    config fields the kernels set and the kernel options of ``configs.KERNEL_OPTIONS``: Helion accepts
    unknown fields silently, so a misspelt option would otherwise fall back to its default unnoticed."""
    doc = json.loads(table.read_text())
    assert doc["device"] and doc["tuned_by"]
    for key, entry in doc["configs"].items():
        kind, dtype_name, _cls = key.split("/")
        assert kind in {"replayssm", "replayssm_split", "replayssm_fused", "standard"}, key
        assert dtype_name in {"*", "float32", "bfloat16", "float16"}, key
        _assert_known_fields(entry, key)


# the tune candidates in use: scripts/ and the newest run plan's points (whole entries) and variants (options
# merged into table entries); older runs' files name options since renamed
_RUNS = sorted(p for p in (ROOT / "results/bench/history").iterdir() if p.is_dir())
_NEWEST = {kind: next(r for r in reversed(_RUNS) if any(r.glob(f"{kind}_*.json"))) for kind in ("points", "variants")}
_POINTS = sorted([*ROOT.glob("scripts/points_*.json"), *_NEWEST["points"].glob("points_*.json")])
_VARIANTS = sorted(_NEWEST["variants"].glob("variants_*.json"))


@pytest.mark.parametrize("points", _POINTS, ids=lambda p: p.name)
def test_tune_points_hold_only_known_fields(points):
    """The committed tune candidates (``gpu_session.sh``'s ``POINTS``) pass the same check: a misspelt
    option in one would time the default instead of the point it names."""
    for i, entry in enumerate(json.loads(points.read_text())):
        _assert_known_fields(entry, i)


@pytest.mark.parametrize("variants", _VARIANTS, ids=lambda p: p.name)
def test_tune_variants_hold_only_known_fields(variants):
    """The same for the variants a run plan merges into table entries (partial entries)."""
    known = _known_fields()
    for i, variant in enumerate(json.loads(variants.read_text())):
        assert variant and set(variant) <= known, (i, set(variant) - known)
