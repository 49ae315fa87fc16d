"""peer_compare.py: the shared driver of the peer comparisons — one dtlab strategy against the PyTorch peer that
implements it, on the same model, weights, batches, optimizer, Gloo backend and threads per rank. The entry points
are thin: compare_ddp.py (dtlab `ddp` vs torch_ddp.py, target 1.05x), compare_fsdp.py (dtlab `fsdp_full_shard`
vs torch_fsdp2.py, target 1.3x), compare_pipeline.py (parallel.pp vs torch_pipeline.py) and compare_tp.py
(parallel.tp vs torch_tp.py) each describe their comparison as a PeerSpec and call main(spec).
See docs/peer-comparison.md.

Two phases:
  1. correctness on `tiny` for 10 steps (the same overrides plus model.preset=tiny train.steps=10): every
     step's loss must agree within rtol 1.3e-6 / atol 1e-5 (torch.testing's fp32 rule);
  2. the timed comparison on the configured run, the two trainings alternating --repeats times (median
     tokens/s of each); --correctness-only stops after phase 1 (what `make test` runs, label peer).
Each phase: `dtlab export-reference`, `torchrun ... <peer script>`, `dtlab launch -n W [setsid -w] dtlab train ...
parallel.strategy=<strategy>`.
Each dtlab rank runs in its own session (setsid -w), as torchrun's ranks do: under Linux autogroup scheduling
a session is a scheduling group, and without this the two dtlab ranks would share one group's CPU while each
PyTorch rank had its own (--rank-sessions launcher measures `dtlab launch` as is).
With --nodes M (M > 1) both sides run on the same emulated cluster, started by the same command:
`dtlab launch --nodes M -n W/M --inter-link RATE PROGRAM` (network namespaces joined by shaped links; needs root or
CAP_NET_ADMIN; docs/launch.md), with the PyTorch script as PROGRAM instead of torchrun's; both sides' ranks are then
started alike, so no setsid is added.
Exit status of main(): 0 when the figures were measured (whether or not the target is met); 1 on any failed
command, on a tiny-phase loss outside fp32 tolerance, or on a timed-phase loss differing by more than 1e-3.
"""

import argparse
import dataclasses
import datetime
import json
import os
import platform
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from dtlab_gpt import within_tolerance  # noqa: E402

RTOL, ATOL = 1.3e-6, 1e-5  # fp32 tolerance (torch.testing defaults for float32)
LOOSE_BOUND = 1e-3         # beyond this the two are not training the same thing: an error


@dataclasses.dataclass(frozen=True)
class PeerSpec:
    """What differs between the comparisons."""
    prog: str             # name used in error messages, e.g. "compare_ddp"
    description: str      # argparse description
    peer_script: str      # the PyTorch side, a file in tests/reference run under torchrun
    peer_label: str       # e.g. "PyTorch DDP"
    strategy: str         # dtlab's parallel.strategy
    target_ratio: float   # dtlab/PyTorch tokens/s to reach in the timed phase
    default_out: str
    default_work: str
    default_repeats: int
    skip_timed_flag: bool = False        # offer --skip-timed too (the older name of --correctness-only)
    report_extra: dict = dataclasses.field(default_factory=dict)  # extra top-level report keys
    record_strategy: bool = False        # phase records carry "strategy"
    record_measured_steps: bool = False  # phase records carry "measured_steps"
    report_max_abs_loss_diff: bool = False  # the report carries the timed "max_abs_loss_diff"
    # A pipeline comparison: --schedule and --virtual are offered, every rank is a pipeline stage (parallel.pp =
    # --world-size, one replica), and these overrides come before the user's (e.g. a micro-batch giving m >= P).
    pipeline: bool = False
    pipeline_overrides: tuple = ()
    # A tensor-parallel comparison: --tp, --sequence-parallel and --strategy (ddp or fsdp_full_shard over the
    # world / tp data-parallel ranks) are offered and set both sides' parallel.tp, sequence_parallel and strategy.
    tensor_parallel: bool = False

    @property
    def dtlab_label(self):
        if self.pipeline:
            return "dtlab pipeline"
        return "dtlab tensor parallel" if self.tensor_parallel else "dtlab " + self.strategy


class CommandFailed(Exception):
    pass


def run(cmd, log_path, env=None):
    """Runs cmd from the repository root, output to log_path; raises CommandFailed with the log's tail.
    Returns what the machine was doing around it: wall seconds, CPU seconds the command's process tree used
    (user + sys, from RUSAGE_CHILDREN) and the 1-minute load average before and after. CPU seconds over wall
    seconds below the number of ranks means the ranks were waiting or were crowded out by other work."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    print("  $ " + shlex.join(cmd), flush=True)
    load_before = os.getloadavg()[0]
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        rc = subprocess.call(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0:
        with open(log_path) as f:
            tail = "".join(f.readlines()[-25:])
        raise CommandFailed(f"command failed with exit code {rc} (log {log_path}):\n  {shlex.join(cmd)}\n{tail}")
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "load1_before": load_before, "load1_after": os.getloadavg()[0]}


def autogroup_enabled():
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return None


def compare_losses(dtlab_losses, torch_losses):
    if len(dtlab_losses) != len(torch_losses):
        raise CommandFailed(f"dtlab recorded {len(dtlab_losses)} steps, PyTorch {len(torch_losses)}")
    diffs = [abs(a - b) for a, b in zip(dtlab_losses, torch_losses)]
    bad = [i + 1 for i, (a, b) in enumerate(zip(dtlab_losses, torch_losses)) if not within_tolerance(a, b, RTOL, ATOL)]
    return {"max_abs_diff": max(diffs) if diffs else 0.0,
            "max_rel_diff": max((d / abs(b) if b else d) for d, b in zip(diffs, torch_losses)) if diffs else 0.0,
            "steps_outside_tolerance": bad, "all_within_tolerance": not bad,
            "bitwise_equal_steps": sum(1 for a, b in zip(dtlab_losses, torch_losses) if a == b)}


def p10(values):
    v = sorted(values)
    return v[int(0.1 * len(v))] if v else 0.0


def phase(spec, name, args, overrides, repeats):
    """export + `repeats` alternating (PyTorch peer, dtlab strategy) runs of one configuration; returns its record."""
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
        env.pop(k, None)  # this driver is not itself a rank
    records = []
    for i in range(repeats):
        torch_json = os.path.join(work, f"torch_{i}.json")
        dtlab_out = os.path.join(work, f"dtlab_{i}")
        peer_args = [os.path.join(HERE, spec.peer_script), "--export", export_dir, "--out", torch_json,
                     "--zero-grad", args.zero_grad]
        torch_cmd = [torchrun, "--standalone", f"--nproc-per-node={W}", *peer_args]
        # torchrun starts every rank in a new session (Popen(start_new_session=True)); with Linux autogroup
        # scheduling each session is one scheduling group, so on a busy machine each PyTorch rank competes
        # with other sessions as a group of its own, while `dtlab launch`'s ranks (setpgid only) share one
        # group. `setsid -w` gives each dtlab rank its own session too, so both sides are scheduled alike.
        session = ["setsid", "-w"] if args.rank_sessions == "own" else []
        launch = [args.dtlab, "launch", "-n", W]
        if args.nodes > 1:  # the same emulated cluster, started the same way, for both sides
            launch = [args.dtlab, "launch", "--nodes", str(args.nodes), "-n", str(args.world_size // args.nodes),
                      "--inter-link", args.inter_link, "--intra-link", args.intra_link]
            torch_cmd = [*launch, sys.executable, *peer_args]
            session = []
        dtlab_cmd = [*launch, *session, args.dtlab, "train", "--config", args.config,
                     *overrides, *args.dtlab_override, f"parallel.strategy={args.strategy}", "--out", dtlab_out]
        order = [("torch", torch_cmd), ("dtlab", dtlab_cmd)]
        if i % 2:
            order.reverse()  # alternate who runs first, so drifting machine load does not favour one side
        machine = {}
        for who, cmd in order:
            print(f"[{name}] run {i + 1}/{repeats}: {spec.peer_label if who == 'torch' else spec.dtlab_label}",
                  flush=True)
            machine[who] = run(cmd, os.path.join(work, f"{who}_{i}.log"), env=env)
        with open(torch_json) as f:
            t = json.load(f)
        with open(os.path.join(dtlab_out, "result.json")) as f:
            d = json.load(f)
        records.append({"torch": t, "dtlab": d, "torch_cmd": torch_cmd, "dtlab_cmd": dtlab_cmd, "machine": machine,
                        "first": order[0][0]})

    first = records[0]
    dtlab_losses = [s["loss"] for s in first["dtlab"]["steps"]]
    torch_losses = first["torch"]["losses"]
    loss_cmp = compare_losses(dtlab_losses, torch_losses)
    # Every repeat should reproduce the first exactly (both sides are deterministic at fixed threads).
    reproducible = all([s["loss"] for s in r["dtlab"]["steps"]] == dtlab_losses and r["torch"]["losses"] == torch_losses
                       for r in records)
    norm_diffs = [abs(s["grad_norm"] - g) for s, g in zip(first["dtlab"]["steps"], first["torch"]["grad_norms"])]
    dtlab_tps = [r["dtlab"]["summary"]["tokens_per_s"] for r in records]
    torch_tps = [r["torch"]["tokens_per_s"] for r in records]
    dtlab_med, torch_med = statistics.median(dtlab_tps), statistics.median(torch_tps)
    # Contention-robust companion figure: the 10th-percentile step time over all measured steps of all
    # repeats. Other work on the machine only ever lengthens steps, so a low percentile approaches the
    # uncontended step time of each side; the median-of-repeats figure above is the headline.
    warm = manifest["config"]["instrument"]["warmup_steps"]
    dtlab_p10 = p10([s["step_ms"] for r in records for s in r["dtlab"]["steps"] if s["step"] > warm])
    torch_p10 = p10([ms for r in records for ms in (r["torch"]["step_ms"][warm:] or r["torch"]["step_ms"])])
    model_cfg = manifest["config"]["model"]
    rec = {"name": name, "overrides": overrides}
    if args.dtlab_override:
        rec["dtlab_only_overrides"] = args.dtlab_override
    if spec.record_strategy:
        rec["strategy"] = args.strategy
    if spec.pipeline:
        par = manifest["config"]["parallel"]
        rec["pipeline"] = {"pp": par["pp"], "schedule": par["pp_schedule"], "virtual_stages": par["pp_virtual_stages"],
                           "microbatches": manifest["accumulation"]}
    if spec.tensor_parallel:
        par = manifest["config"]["parallel"]
        rec["tensor_parallel"] = {"tp": par["tp"], "sequence_parallel": par["sequence_parallel"],
                                  "strategy": par["strategy"], "data_parallel": manifest["data_parallel"]}
    rec.update({
        "model": {k: model_cfg[k] for k in ("preset", "d_model", "n_layers", "n_heads", "n_kv_heads", "ffn_hidden",
                                            "vocab_size", "seq_len", "tie_embeddings")},
        "params": manifest["param_count"],
        "world_size": args.world_size,
        "cluster": ({"nodes": args.nodes, "ranks_per_node": args.world_size // args.nodes,
                     "inter_link": args.inter_link, "intra_link": args.intra_link} if args.nodes > 1 else None),
        "steps": manifest["steps"],
        "global_batch": manifest["global_batch"],
        "micro_batch": manifest["micro_batch"],
        "accumulation": manifest["accumulation"],
        "optimizer": manifest["config"]["train"]["optimizer"],
        "threads_per_rank": {"dtlab": first["dtlab"]["context"].get("threads"), "torch": first["torch"]["threads"]},
    })
    if spec.record_measured_steps:
        rec["measured_steps"] = {"dtlab": first["dtlab"]["summary"].get("measured_steps"),
                                 "torch": first["torch"]["measured_steps"]}
    rec.update({
        "tokens_per_s": {"dtlab": dtlab_med, "torch": torch_med, "dtlab_runs": dtlab_tps, "torch_runs": torch_tps},
        "step_ms_median": {"dtlab": statistics.median(r["dtlab"]["summary"]["step_ms_median"] for r in records),
                           "torch": statistics.median(statistics.median(r["torch"]["step_ms"][warm:]
                                                                        or r["torch"]["step_ms"]) for r in records)},
        "ratio_dtlab_over_torch": dtlab_med / torch_med,
        "step_ms_p10": {"dtlab": dtlab_p10, "torch": torch_p10},
        "ratio_p10": torch_p10 / dtlab_p10 if dtlab_p10 else 0.0,
        # Per repeat: who ran first, tokens/s of each, and the machine around each run (wall, CPU, load).
        "runs": [{"first": r["first"], "dtlab_tokens_per_s": r["dtlab"]["summary"]["tokens_per_s"],
                  "torch_tokens_per_s": r["torch"]["tokens_per_s"], "machine": r["machine"]} for r in records],
        "losses": {"dtlab": dtlab_losses, "torch": torch_losses, **loss_cmp,
                   "rtol": RTOL, "atol": ATOL, "reproducible_across_repeats": reproducible},
        "grad_norm_max_abs_diff": max(norm_diffs) if norm_diffs else 0.0,
        "commands": {"export": export_cmd, "torch": first["torch_cmd"], "dtlab": first["dtlab_cmd"]},
    })
    return rec


def print_phase(spec, rec, timed):
    tps, lc, m = rec["tokens_per_s"], rec["losses"], rec["model"]
    width = max(14, len(spec.dtlab_label) + 1, len(spec.peer_label) + 1)
    c = rec.get("cluster")
    where = (f"{c['nodes']} nodes x {c['ranks_per_node']} (inter-node link {c['inter_link']}, intra {c['intra_link']})"
             if c else "one node")
    print(f"\n== {rec['name']}: preset {m['preset']} ({rec['params']:,} params), world {rec['world_size']} on {where}, "
          f"{rec['steps']} steps, global batch {rec['global_batch']} x seq {m['seq_len']}, micro {rec['micro_batch']} "
          f"(accumulation {rec['accumulation']}), {rec['optimizer']}, threads/rank {rec['threads_per_rank']['dtlab']}")
    if rec.get("pipeline"):
        pl = rec["pipeline"]
        print(f"  pipeline: pp {pl['pp']}, schedule {pl['schedule']}, {pl['virtual_stages']} chunk(s) per rank, "
              f"{pl['microbatches']} micro-batches per step")
    if rec.get("tensor_parallel"):
        tp = rec["tensor_parallel"]
        print(f"  tensor parallel: tp {tp['tp']}{' + sequence parallel' if tp['sequence_parallel'] else ''}, "
              f"{tp['strategy']} over {tp['data_parallel']} data-parallel rank(s)")
    if rec.get("dtlab_only_overrides"):
        print(f"  dtlab's run only: {' '.join(rec['dtlab_only_overrides'])}")
    print(f"  {'':<{width}}{'tokens/s':>12}{'step ms (median)':>19}")
    print(f"  {spec.dtlab_label:<{width}}{tps['dtlab']:>12.0f}{rec['step_ms_median']['dtlab']:>19.2f}")
    print(f"  {spec.peer_label:<{width}}{tps['torch']:>12.0f}{rec['step_ms_median']['torch']:>19.2f}")
    print(f"  10th-percentile step: dtlab {rec['step_ms_p10']['dtlab']:.2f} ms, PyTorch "
          f"{rec['step_ms_p10']['torch']:.2f} ms -> ratio {rec['ratio_p10']:.3f} (contention-robust companion)")
    for i, r in enumerate(rec["runs"]):
        mt, md = r["machine"]["torch"], r["machine"]["dtlab"]
        print(f"    run {i + 1} ({r['first']} first): dtlab {r['dtlab_tokens_per_s']:.0f} tok/s "
              f"(load {md['load1_before']:.1f}, {md['cpu_s'] / md['wall_s']:.2f} cores busy), PyTorch "
              f"{r['torch_tokens_per_s']:.0f} tok/s (load {mt['load1_before']:.1f}, "
              f"{mt['cpu_s'] / mt['wall_s']:.2f} cores busy)")
    if timed:
        verdict = "met" if rec["ratio_dtlab_over_torch"] >= spec.target_ratio else "NOT met"
        print(f"  ratio dtlab/PyTorch: {rec['ratio_dtlab_over_torch']:.3f}  (target >= {spec.target_ratio}: {verdict})")
    else:
        print(f"  ratio dtlab/PyTorch: {rec['ratio_dtlab_over_torch']:.3f}  (not the timed figure)")
    print(f"  losses: max |diff| {lc['max_abs_diff']:.3g}, max rel {lc['max_rel_diff']:.3g}, "
          f"{lc['bitwise_equal_steps']}/{len(lc['dtlab'])} steps bit-identical, "
          f"{'all within' if lc['all_within_tolerance'] else 'NOT all within'} rtol {RTOL} / atol {ATOL}"
          + ("" if lc["all_within_tolerance"] else f" (steps {lc['steps_outside_tolerance']})"))
    print(f"  grad norm max |diff| {rec['grad_norm_max_abs_diff']:.3g}; "
          f"repeats reproduce the losses: {lc['reproducible_across_repeats']}", flush=True)


def parse_args(spec):
    ap = argparse.ArgumentParser(description=spec.description,
                                 epilog="Positional section.key=value overrides apply to both phases.")
    ap.add_argument("--dtlab", default=os.path.join(REPO, "build", "bin", "dtlab"), help="the dtlab binary")
    ap.add_argument("--config", default=os.path.join(HERE, "peer_ddp.yaml"), help="dtlab YAML config")
    ap.add_argument("--world-size", type=int, default=2, help="ranks in all (nodes x ranks per node)")
    ap.add_argument("--nodes", type=int, default=1,
                    help="> 1: both sides on an emulated cluster of this many nodes (dtlab launch --nodes)")
    ap.add_argument("--inter-link", default="1gbit", help="with --nodes: the inter-node rate (200mbit, 1gbit, ...)")
    ap.add_argument("--intra-link", default="none", help="with --nodes: the intra-node rate (default unshaped)")
    ap.add_argument("--repeats", type=int, default=spec.default_repeats,
                    help="alternating runs per side in the timed phase (median)")
    ap.add_argument("--zero-grad", choices=["none", "zero"], default="none",
                    help="PyTorch side: zero_grad(set_to_none=True) (default) or in-place zeroing")
    ap.add_argument("--rank-sessions", choices=["own", "launcher"], default="own",
                    help="dtlab side: each rank in its own session like torchrun's ranks (default, fair under "
                         "autogroup scheduling), or as `dtlab launch` starts them")
    ap.add_argument("--work", default=spec.default_work, help="scratch directory")
    ap.add_argument("--out", default=spec.default_out)
    ap.add_argument("--skip-tiny-check", action="store_true", help="skip the 10-step correctness phase on tiny")
    # --correctness-only: phase 1 alone, seconds on 2 cores (`make test` runs it: tests/reference/CMakeLists.txt).
    only_names = ["--correctness-only"] + (["--skip-timed"] if spec.skip_timed_flag else [])
    ap.add_argument(*only_names, dest="skip_timed", action="store_true",
                    help="only the tiny correctness phase (no timed run)")
    ap.add_argument("--dtlab-override", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for dtlab's run only, after the shared ones (e.g. parallel.bucket_cap_mb=4: "
                         "a setting PyTorch keeps at the config's value); repeatable, recorded in the JSON")
    if spec.pipeline:
        ap.add_argument("--schedule", default="1f1b", choices=["gpipe", "1f1b", "interleaved_1f1b", "zero_bubble"],
                        help="parallel.pp_schedule of both sides (parallel.pp is --world-size)")
        ap.add_argument("--virtual", type=int, default=1, help="parallel.pp_virtual_stages (chunks per rank)")
    if spec.tensor_parallel:
        ap.add_argument("--tp", type=int, default=2, help="parallel.tp of both sides (divides --world-size)")
        ap.add_argument("--sequence-parallel", action="store_true", help="parallel.sequence_parallel=true")
        ap.add_argument("--strategy", default="ddp", choices=["ddp", "fsdp_full_shard"],
                        help="over the world / tp data-parallel ranks: ddp (only at dp 1) or fsdp_full_shard "
                             "(PyTorch: FSDP2 over the dp dimension of a (dp, tp) mesh)")
    ap.add_argument("overrides", nargs="*", help="section.key=value, e.g. train.steps=50")
    args = ap.parse_args()
    if not spec.tensor_parallel:
        args.strategy = spec.strategy
    else:
        if args.tp < 2 or args.world_size % args.tp:
            ap.error(f"--tp {args.tp} must be >= 2 and divide --world-size {args.world_size}")
        if args.strategy == "ddp" and args.world_size != args.tp:
            ap.error(f"--strategy ddp runs tp alone (--world-size {args.tp}); with data-parallel ranks the peer is "
                     "FSDP2: --strategy fsdp_full_shard")
        if args.nodes > 1:
            ap.error("--nodes: the tensor-parallel comparison runs on one node")
        args.overrides = [f"parallel.tp={args.tp}", f"parallel.sequence_parallel={str(args.sequence_parallel).lower()}",
                          f"parallel.strategy={args.strategy}", *args.overrides]
    if spec.pipeline:
        if args.nodes > 1:
            ap.error("--nodes: the pipeline comparison runs on one node")
        args.overrides = [*spec.pipeline_overrides, f"parallel.pp={args.world_size}",
                          f"parallel.pp_schedule={args.schedule}", f"parallel.pp_virtual_stages={args.virtual}",
                          *args.overrides]
    if args.skip_timed and args.skip_tiny_check:
        ap.error("--correctness-only with --skip-tiny-check leaves nothing to run")
    if args.nodes < 1 or args.world_size % args.nodes != 0:
        ap.error(f"--nodes {args.nodes} must be >= 1 and divide --world-size {args.world_size}")
    args.dtlab = os.path.abspath(args.dtlab)
    args.config = os.path.abspath(args.config)
    return args


def main(spec):
    args = parse_args(spec)
    if args.rank_sessions == "own" and shutil.which("setsid") is None:
        print(f"{spec.prog}: `setsid` (util-linux) not found; needed for --rank-sessions own "
              "(or pass --rank-sessions launcher)", file=sys.stderr)
        return 1
    if not os.access(args.dtlab, os.X_OK):
        print(f"{spec.prog}: {args.dtlab} is not an executable dtlab binary (build it, or pass --dtlab)",
              file=sys.stderr)
        return 1

    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    load_before = os.getloadavg()
    report = {"started_at": started, "host": platform.node(), "cores": os.cpu_count(),
              "load_average_at_start": load_before, **spec.report_extra, "target_ratio": spec.target_ratio,
              "tolerance": {"rtol": RTOL, "atol": ATOL, "loose_bound": LOOSE_BOUND},
              "rank_sessions": args.rank_sessions, "autogroup_scheduling": autogroup_enabled(),
              "driver_command": [sys.executable, *sys.argv]}
    errors = []
    try:
        if not args.skip_tiny_check:
            tiny_overrides = [*args.overrides, "model.preset=tiny", "train.steps=10"]
            if spec.pipeline and args.world_size * args.virtual > 2:  # tiny has 2 blocks; each stage needs one
                tiny_overrides.append(f"model.n_layers={args.world_size * args.virtual}")
            tiny = phase(spec, "tiny_check", args, tiny_overrides, 1)
            report["tiny_check"] = tiny
            print_phase(spec, tiny, timed=False)
            if not tiny["losses"]["all_within_tolerance"]:
                errors.append("tiny check: losses differ beyond fp32 tolerance at steps "
                              f"{tiny['losses']['steps_outside_tolerance']}")
        if not args.skip_timed:
            timed = phase(spec, "timed", args, list(args.overrides), max(1, args.repeats))
            report["timed"] = timed
            print_phase(spec, timed, timed=True)
            report["ratio_dtlab_over_torch"] = timed["ratio_dtlab_over_torch"]
            report["target_met"] = timed["ratio_dtlab_over_torch"] >= spec.target_ratio
            if spec.report_max_abs_loss_diff:
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
        print(f"{spec.prog}: error: {e}", file=sys.stderr)
    return 1 if errors else 0
