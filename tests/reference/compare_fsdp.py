"""compare_fsdp.py: the FSDP peer comparison — dtlab's `fsdp_full_shard` strategy against PyTorch's FSDP2
(`fully_shard`, tests/reference/torch_fsdp2.py): same model, weights, batches, optimizer, Gloo backend and
threads per rank; prints tokens/s of both, the ratio dtlab/PyTorch (target >= 1.3 at world 2) and the
step-by-step loss agreement, and records it in results/peer/fsdp_vs_pytorch.json. See docs/peer-comparison.md.

    ~/.cache/dtlab/venv/bin/python tests/reference/compare_fsdp.py [--dtlab build/bin/dtlab]
        [--config tests/reference/peer_ddp.yaml] [--world-size 2] [--repeats 3] [section.key=value ...]

The phases, helpers and exit rules are compare_ddp.py's (imported from it): 1. correctness on `tiny`, 10 steps,
every loss within rtol 1.3e-6 / atol 1e-5; 2. the timed run (default `small`, 30 steps, global batch 8, micro 4,
AdamW, world 2), the two sides alternating --repeats times (median). The dtlab side is
`dtlab launch -n W setsid -w dtlab train ... parallel.strategy=fsdp_full_shard`.
Exit status: 0 when the figures were measured (whether or not 1.3x is met); 1 on a failed command, a tiny-phase
loss outside fp32 tolerance, or a timed-phase loss differing by more than 1e-3.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from compare_ddp import (ATOL, LOOSE_BOUND, RTOL, CommandFailed, autogroup_enabled,  # noqa: E402
                         compare_losses, run)

TARGET_RATIO = 1.3
STRATEGY = "fsdp_full_shard"


def p10(values):
    v = sorted(values)
    return v[int(0.1 * len(v))] if v else 0.0


def phase(name, args, overrides, repeats):
    """export + `repeats` alternating (PyTorch FSDP2, dtlab fsdp_full_shard) runs; returns its record."""
    work = os.path.join(args.work, name)
    W = str(args.world_size)
    export_dir = os.path.join(work, "export")
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    export_cmd = [args.dtlab, "export-reference", "--config", args.config, *overrides, "--world-size", W,
                  "--out", export_dir]
    print(f"[{name}] exporting reference inputs", flush=True)
    run(export_cmd, os.path.join(work, "export.log"))
    with open(os.path.join(export_dir, "manifest.json")) as f:
        manifest = json.load(f)
    env = dict(os.environ)
    for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    records = []
    for i in range(repeats):
        torch_json = os.path.join(work, f"torch_{i}.json")
        dtlab_out = os.path.join(work, f"dtlab_{i}")
        torch_cmd = [torchrun, "--standalone", f"--nproc-per-node={W}", os.path.join(HERE, "torch_fsdp2.py"),
                     "--export", export_dir, "--out", torch_json, "--zero-grad", args.zero_grad]
        session = ["setsid", "-w"] if args.rank_sessions == "own" else []  # see compare_ddp.py / the doc
        dtlab_cmd = [args.dtlab, "launch", "-n", W, *session, args.dtlab, "train", "--config", args.config,
                     *overrides, f"parallel.strategy={STRATEGY}", "--out", dtlab_out]
        order = [("torch", torch_cmd), ("dtlab", dtlab_cmd)]
        if i % 2:
            order.reverse()
        machine = {}
        for who, cmd in order:
            print(f"[{name}] run {i + 1}/{repeats}: {'PyTorch FSDP2' if who == 'torch' else 'dtlab ' + STRATEGY}",
                  flush=True)
            machine[who] = run(cmd, os.path.join(work, f"{who}_{i}.log"), env=env)
        with open(torch_json) as f:
            t = json.load(f)
        with open(os.path.join(dtlab_out, "result.json")) as f:
            d = json.load(f)
        records.append({"torch": t, "dtlab": d, "torch_cmd": torch_cmd, "dtlab_cmd": dtlab_cmd,
                        "machine": machine, "first": order[0][0]})

    first = records[0]
    dtlab_losses = [s["loss"] for s in first["dtlab"]["steps"]]
    torch_losses = first["torch"]["losses"]
    loss_cmp = compare_losses(dtlab_losses, torch_losses)
    reproducible = all([s["loss"] for s in r["dtlab"]["steps"]] == dtlab_losses and r["torch"]["losses"] == torch_losses
                       for r in records)
    norm_diffs = [abs(s["grad_norm"] - g) for s, g in zip(first["dtlab"]["steps"], first["torch"]["grad_norms"])]
    dtlab_tps = [r["dtlab"]["summary"]["tokens_per_s"] for r in records]
    torch_tps = [r["torch"]["tokens_per_s"] for r in records]
    dtlab_med, torch_med = statistics.median(dtlab_tps), statistics.median(torch_tps)
    warm = manifest["config"]["instrument"]["warmup_steps"]
    dtlab_p10 = p10([s["step_ms"] for r in records for s in r["dtlab"]["steps"] if s["step"] > warm])
    torch_p10 = p10([ms for r in records for ms in (r["torch"]["step_ms"][warm:] or r["torch"]["step_ms"])])
    model_cfg = manifest["config"]["model"]
    return {
        "name": name, "overrides": overrides, "strategy": STRATEGY,
        "model": {k: model_cfg[k] for k in ("preset", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden",
                                            "vocab_size", "seq_len", "tie_embeddings")},
        "params": manifest["param_count"], "world_size": args.world_size, "steps": manifest["steps"],
        "global_batch": manifest["global_batch"], "micro_batch": manifest["micro_batch"],
        "accumulation": manifest["accumulation"], "optimizer": manifest["config"]["train"]["optimizer"],
        "threads_per_rank": {"dtlab": first["dtlab"]["context"].get("threads"), "torch": first["torch"]["threads"]},
        "tokens_per_s": {"dtlab": dtlab_med, "torch": torch_med, "dtlab_runs": dtlab_tps, "torch_runs": torch_tps},
        "step_ms_median": {"dtlab": statistics.median(r["dtlab"]["summary"]["step_ms_median"] for r in records),
                           "torch": statistics.median(statistics.median(r["torch"]["step_ms"][warm:]
                                                                        or r["torch"]["step_ms"]) for r in records)},
        "ratio_dtlab_over_torch": dtlab_med / torch_med,
        "step_ms_p10": {"dtlab": dtlab_p10, "torch": torch_p10},
        "ratio_p10": torch_p10 / dtlab_p10 if dtlab_p10 else 0.0,
        "runs": [{"first": r["first"], "dtlab_tokens_per_s": r["dtlab"]["summary"]["tokens_per_s"],
                  "torch_tokens_per_s": r["torch"]["tokens_per_s"], "machine": r["machine"]} for r in records],
        "losses": {"dtlab": dtlab_losses, "torch": torch_losses, **loss_cmp,
                   "rtol": RTOL, "atol": ATOL, "reproducible_across_repeats": reproducible},
        "grad_norm_max_abs_diff": max(norm_diffs) if norm_diffs else 0.0,
        "commands": {"export": export_cmd, "torch": first["torch_cmd"], "dtlab": first["dtlab_cmd"]},
    }


def print_phase(rec, timed):
    tps, lc, m = rec["tokens_per_s"], rec["losses"], rec["model"]
    print(f"\n== {rec['name']}: preset {m['preset']} ({rec['params']:,} params), world {rec['world_size']}, "
          f"{rec['steps']} steps, global batch {rec['global_batch']} x seq {m['seq_len']}, micro {rec['micro_batch']} "
          f"(accumulation {rec['accumulation']}), {rec['optimizer']}, threads/rank {rec['threads_per_rank']['dtlab']}")
    print(f"  {'':<22}{'tokens/s':>12}{'step ms (median)':>19}")
    print(f"  {'dtlab ' + STRATEGY:<22}{tps['dtlab']:>12.0f}{rec['step_ms_median']['dtlab']:>19.2f}")
    print(f"  {'PyTorch FSDP2':<22}{tps['torch']:>12.0f}{rec['step_ms_median']['torch']:>19.2f}")
    print(f"  10th-percentile step: dtlab {rec['step_ms_p10']['dtlab']:.2f} ms, PyTorch "
          f"{rec['step_ms_p10']['torch']:.2f} ms -> ratio {rec['ratio_p10']:.3f}")
    for i, r in enumerate(rec["runs"]):
        mt, md = r["machine"]["torch"], r["machine"]["dtlab"]
        print(f"    run {i + 1} ({r['first']} first): dtlab {r['dtlab_tokens_per_s']:.0f} tok/s "
              f"(load {md['load1_before']:.1f}, {md['cpu_s'] / md['wall_s']:.2f} cores busy), PyTorch "
              f"{r['torch_tokens_per_s']:.0f} tok/s (load {mt['load1_before']:.1f}, "
              f"{mt['cpu_s'] / mt['wall_s']:.2f} cores busy)")
    verdict = ("met" if rec["ratio_dtlab_over_torch"] >= TARGET_RATIO else "NOT met") if timed else "not the timed figure"
    print(f"  ratio dtlab/PyTorch: {rec['ratio_dtlab_over_torch']:.3f}  (target >= {TARGET_RATIO}: {verdict})")
    print(f"  losses: max |diff| {lc['max_abs_diff']:.3g}, max rel {lc['max_rel_diff']:.3g}, "
          f"{lc['bitwise_equal_steps']}/{len(lc['dtlab'])} steps bit-identical, "
          f"{'all within' if lc['all_within_tolerance'] else 'NOT all within'} rtol {RTOL} / atol {ATOL}"
          + ("" if lc["all_within_tolerance"] else f" (steps {lc['steps_outside_tolerance']})"))
    print(f"  grad norm max |diff| {rec['grad_norm_max_abs_diff']:.3g}; "
          f"repeats reproduce the losses: {lc['reproducible_across_repeats']}", flush=True)


def main():
    ap = argparse.ArgumentParser(description="dtlab fsdp_full_shard vs PyTorch FSDP2: throughput and loss agreement",
                                 epilog="Positional section.key=value overrides apply to both phases.")
    ap.add_argument("--dtlab", default=os.path.join(REPO, "build", "bin", "dtlab"), help="the dtlab binary")
    ap.add_argument("--config", default=os.path.join(HERE, "peer_ddp.yaml"), help="dtlab YAML config")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="alternating runs per side in the timed phase (median)")
    ap.add_argument("--zero-grad", choices=["none", "zero"], default="none")
    ap.add_argument("--rank-sessions", choices=["own", "launcher"], default="own")
    ap.add_argument("--work", default=os.path.join(REPO, "results", "peer", "work_fsdp"), help="scratch directory")
    ap.add_argument("--out", default=os.path.join(REPO, "results", "peer", "fsdp_vs_pytorch.json"))
    ap.add_argument("--skip-tiny-check", action="store_true")
    ap.add_argument("--skip-timed", action="store_true", help="only the tiny correctness phase")
    ap.add_argument("overrides", nargs="*", help="section.key=value, e.g. train.steps=50")
    args = ap.parse_args()
    args.dtlab = os.path.abspath(args.dtlab)
    args.config = os.path.abspath(args.config)
    if args.rank_sessions == "own" and shutil.which("setsid") is None:
        print("compare_fsdp: `setsid` not found (or pass --rank-sessions launcher)", file=sys.stderr)
        return 1
    if not os.access(args.dtlab, os.X_OK):
        print(f"compare_fsdp: {args.dtlab} is not an executable dtlab binary", file=sys.stderr)
        return 1
    load_before = os.getloadavg()
    report = {"started_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "host": platform.node(), "cores": os.cpu_count(), "load_average_at_start": load_before,
              "strategy": STRATEGY, "peer": "torch.distributed.fsdp.fully_shard (FSDP2)",
              "target_ratio": TARGET_RATIO, "tolerance": {"rtol": RTOL, "atol": ATOL, "loose_bound": LOOSE_BOUND},
              "rank_sessions": args.rank_sessions, "autogroup_scheduling": autogroup_enabled(),
              "driver_command": [sys.executable, *sys.argv]}
    errors = []
    try:
        if not args.skip_tiny_check:
            tiny = phase("tiny_check", args, [*args.overrides, "model.preset=tiny", "train.steps=10"], 1)
            report["tiny_check"] = tiny
            print_phase(tiny, timed=False)
            if not tiny["losses"]["all_within_tolerance"]:
                errors.append("tiny check: losses differ beyond fp32 tolerance at steps "
                              f"{tiny['losses']['steps_outside_tolerance']}")
        if not args.skip_timed:
            timed = phase("timed", args, list(args.overrides), max(1, args.repeats))
            report["timed"] = timed
            print_phase(timed, timed=True)
            report["ratio_dtlab_over_torch"] = timed["ratio_dtlab_over_torch"]
            report["target_met"] = timed["ratio_dtlab_over_torch"] >= TARGET_RATIO
            report["max_abs_loss_diff"] = timed["losses"]["max_abs_diff"]
            if timed["losses"]["max_abs_diff"] > LOOSE_BOUND:
                errors.append(f"timed run: losses differ by {timed['losses']['max_abs_diff']:.3g} > {LOOSE_BOUND}")
    except CommandFailed as e:
        errors.append(str(e))
    report["load_average_at_end"] = os.getloadavg()
    report["errors"] = errors
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(report, f, indent=2)
    os.replace(args.out + ".tmp", args.out)
    print(f"\nload average at start {load_before[0]:.2f}, at end {report['load_average_at_end'][0]:.2f} "
          f"on {os.cpu_count()} cores; figures in {args.out}")
    for e in errors:
        print(f"compare_fsdp: error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
