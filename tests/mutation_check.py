"""``python tests/mutation_check.py``: plant each bug class the suite must catch, one at a time, in a
temporary copy of the repository, run the fast kernel tests (Helion's interpreter) against it, and
report which were caught. Exit 1 if any planted bug survives. Takes 5-15 minutes on 2 cores; not part
of the test command (run it before changing the tests or the kernels' masking and flush logic).

    python tests/mutation_check.py            # every mutant
    python tests/mutation_check.py -k flush   # the mutants whose name contains "flush"
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
K = "replayssm_kernels/kernels/"

# name -> (file, text, planted text): each a small bug of a class the suite has missed before
MUTANTS = {
    "flush_one_step_early": (K + "common.py", "flush = c == L - 1", "flush = c == L - 2"),
    "ring_weights_without_decay": (
        K + "ring_weights.py", "m = torch.exp(newer) * kappa * alpha", "m = kappa * alpha"
    ),
    "stale_entry_read_single_load": (K + "state.py", "live = ring < c", "live = ring <= c"),
    "stale_entry_read_ring_loop": (K + "state.py", "hl.tile(0, c, block_size=RB)", "hl.tile(0, c + 1, block_size=RB)"),
    "wrong_gqa_head": (K + "ring_weights.py", "h = tile_j.index // HPQ", "h = tile_j.index % HPQ"),
    "padding_rows_append": (K + "ring_weights.py", "if valid & ~flush:", "if ~flush:"),
    "corrupted_cursor_not_padding": (
        K + "common.py", "valid = (index >= 0) & (index < num_slots) & (cursor >= 0) & (cursor < L)",
        "valid = (index >= 0) & (index < num_slots)",
    ),
    "walked_flush_without_decay": (K + "common.py", "w_alpha * torch.exp(gamma)", "w_alpha"),
    "flush_without_checkpoint_decay": (
        K + "state.py", "S = S * decay[tile_b, j, tile_fk][:, None, :]", "S = S"
    ),
    "flush_rows_rank_off_by_one": (K + "flush_rows.py", "(count[None, :] <= r)", "(count[None, :] < r)"),
    "gate_appended_wrong": (K + "ring_weights.py", "= g[None, :, None, :]", "= g[None, :, None, :] * 0.5"),
    "delta_appended_perturbed": (
        K + "state.py", "d_cache[slot, j, tile_c, tile_v] = u[None, None, :]",
        "d_cache[slot, j, tile_c, tile_v] = 1.001 * u[None, None, :]",
    ),
    "flush_key_unnormalised": (
        K + "state.py", "k_c = k_view[row, h, tile_fk].to(torch.float32) * k_scale",
        "k_c = k_view[row, h, tile_fk].to(torch.float32)",
    ),
    "standard_without_decay": (K + "standard.py", ".to(torch.float32) * torch.exp(g)[None, :]", ".to(torch.float32)"),
    "gdn_gate_read_per_channel": (K + "common.py", "else channels) * 0", "else channels)"),
    "spec_path_without_decay": (
        K + "spec_weights.py", "on_path[:, None] > 0, G - G_i[None, :], G * 0", "on_path[:, None] > 0, G * 0, G * 0"
    ),
    "spec_verify_reads_stale": (
        K + "spec_state.py", "hl.tile(0, c, block_size=RB)", "hl.tile(0, c + 1, block_size=RB)"
    ),
    "spec_tree_entries_not_moved": (K + "spec_commit.py", "dst = c + tile_m.index", "dst = src"),
    "spec_cursor_folds_early": (
        K + "spec_cursor.py", "fold = c + n + T > cache_length", "fold = c + n + T >= cache_length"
    ),
    "fused_stale_entry_read": (K + "fused.py", "live = (pos < c)[None, :]", "live = (pos <= c)[None, :]"),
    "fused_gdn_newer_tiles_dropped": (K + "fused.py", "return gam_next, newer", "return gam_next, newer * 0"),
    "fused_ring_without_token_decay": (
        K + "fused.py", "ring_w = torch.exp(G * 0 + g[None, :]) if HEAD_GATE", "ring_w = torch.exp(G * 0) if HEAD_GATE"
    ),
}  # fmt: skip
TESTS = ["tests/test_kernels_cpu.py", "tests/test_spec_kernels_cpu.py"]


def run_mutant(name: str, path: str, old: str, new: str) -> tuple[bool, float]:
    """(caught, seconds): True when the fast tests fail against the planted bug."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".venv", ".git", ".whl", "results", "__pycache__"))
        target = copy / path
        text = target.read_text()
        if old not in text:
            raise SystemExit(f"mutant {name}: {old!r} is not in {path} any more; update MUTANTS")
        target.write_text(text.replace(old, new, 1))
        env = dict(os.environ, HELION_INTERPRET="1", PYTHONPATH=str(copy), MPLBACKEND="Agg")
        start = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS],
            cwd=copy, env=env, capture_output=True, text=True,
        )  # fmt: skip
        if str(copy) not in subprocess.run(
            [sys.executable, "-c", "import replayssm_kernels; print(replayssm_kernels.__file__)"],
            cwd=copy, env=env, capture_output=True, text=True,
        ).stdout:  # fmt: skip
            raise SystemExit("the tests imported the installed package, not the mutated copy")
        return proc.returncode != 0, time.time() - start


def main() -> int:
    ap = argparse.ArgumentParser(prog="python tests/mutation_check.py", description=__doc__.splitlines()[0])
    ap.add_argument("-k", default="", help="only the mutants whose name contains this")
    args = ap.parse_args()
    survived = []
    for name, (path, old, new) in MUTANTS.items():
        if args.k not in name:
            continue
        caught, seconds = run_mutant(name, path, old, new)
        print(f"{name:34s} {'caught' if caught else 'SURVIVED'} ({seconds:.0f} s)", flush=True)
        if not caught:
            survived.append(name)
    print(f"{len(survived)} planted bug(s) survived: {survived}" if survived else "every planted bug was caught")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
