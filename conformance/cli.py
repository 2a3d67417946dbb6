"""``tilefoundry conformance``: run / fuzz / list / merge / diff / coverage (see
docs/conformance.md).

Exit status: 0 when no case is FAIL / CRASH / TIMEOUT / ERROR / XPASS (against ``--baseline``:
none the baseline does not list) and something was judged, 1 otherwise, 2 for a run that could
not start (an unloadable backend, malformed or unknown capability names, a bad manifest or
baseline, a bad shard, an unwritable report path: one line on stderr, before any case runs),
130 when interrupted. ``merge`` exits as the merged run would; ``diff`` exits 1 when the second
run has a regression.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

from tilefoundry.conformance.input_checks import refuse_existing_results
from tilefoundry.conformance.terminal import (
    printable,
    results_write_error,
    terminal_records,
    writing,
)
from tilefoundry.errors import TilefoundryError

PROG = "tilefoundry conformance"
DEFAULT_MEMORY_LIMIT_MB = 8192.0  # processes.DEFAULT_MEMORY_LIMIT_MB (checked by a test)
RAW = argparse.RawDescriptionHelpFormatter
DEFAULT_FUZZ_DB = ".tilefoundry/fuzz-db"
DEFAULT_GENERATOR = "tilefoundry.oracle.programs:generate_program"


def _common(p: argparse.ArgumentParser, *, jsonl: str, timeout: float) -> None:
    p.add_argument("--backend", required=True,
                   help="'package.module:factory', a built-in name ('reference') or a "
                        "'tilefoundry.backends' entry point")
    p.add_argument("-j", "--jobs", type=int, default=1,
                   help="worker processes; with --executor ray, cases in flight (default 1)")
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: forked worker processes (default); ray: one Ray task per case "
                        "on a Ray cluster (pip install 'tilefoundry[ray]')")
    p.add_argument("--start-method", metavar="METHOD",
                   help="how local workers start: fork (default), spawn or forkserver; wins "
                        "over the backend's start_method attribute (spawn / forkserver: for "
                        "runtimes that break across fork, such as JAX or CUDA)")
    p.add_argument("--address", metavar="ADDR",
                   help="with --executor ray: the Ray cluster to join (HOST:PORT of its head, "
                        "ray://HOST:PORT, auto); without it a local cluster of -j CPUs is "
                        "started")
    p.add_argument("--timeout", type=float, default=timeout,
                   help=f"per-case time limit in seconds (default {timeout:g})")
    p.add_argument("--memory-limit", type=float, default=DEFAULT_MEMORY_LIMIT_MB, metavar="MB",
                   help=f"per-case memory limit: a worker whose resident set grows past it is "
                        f"killed and the case is CRASH 'memory limit N MB exceeded' (default "
                        f"{DEFAULT_MEMORY_LIMIT_MB:g}; 0: none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the cases (default 0)")
    p.add_argument("--jsonl", default=jsonl,
                   help=f"results, one JSON object per case, appended as cases finish "
                        f"(default {jsonl})")
    p.add_argument("--manifest", help="a TOML manifest of xfail / skip / tolerance / admit "
                                      "entries")
    p.add_argument("--admit", metavar="NAMES",
                   help="judge under these declared relaxations too, comma-separated (nsz, "
                        "nnan, ninf, ftz, afn, arcp, contract, excess, wp; name@Op scopes one "
                        "to an op class): a case they admit is ADMITTED, never PASS")
    p.add_argument("--junit", help="write a JUnit XML report here")
    p.add_argument("--coverage", help="write the op x dtype coverage matrix here (markdown "
                                      "for *.md, plain text otherwise)")
    p.add_argument("--html", metavar="FILE",
                   help="write a self-contained HTML report here (summary, coverage heat map, "
                        "every failure with its program and failing element classes)")
    p.add_argument("--repro-dir", help="write a reproducer directory per FAIL, ERROR, CRASH "
                                       "and TIMEOUT under here")
    p.add_argument("--reduce", type=float, default=0.0, metavar="SECONDS",
                   help="shrink each FAIL with the oracle's reducer for up to this long "
                        "(written to <repro>/reduced; needs --repro-dir)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="live progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("--capabilities", metavar="FILE",
                   help="judge with the capability set of this JSON file (what 'conformance "
                        "probe' writes) instead of the backend's capabilities()")


def add_parser(sub) -> None:
    p = sub.add_parser("conformance", help="judge a backend on the conformance catalog",
                       epilog="subcommand help: tilefoundry conformance run --help (and fuzz, "
                              "list, merge, diff, probe, coverage)",
                       description="Judge a backend on the conformance catalog: a verdict per "
                                   "case, a summary, JSON lines, JUnit XML, a coverage matrix "
                                   "and a reproducer per failure.")
    csub = p.add_subparsers(dest="conformance_command")
    r = csub.add_parser(
        "run", help="run a tier of the catalog against a backend", formatter_class=RAW,
        description="Run a tier of the conformance catalog against a backend: one verdict per "
                    "case, a summary, JSON lines and optional reports.",
        epilog="examples:\n"
               "  tilefoundry conformance run --backend reference -j 2\n"
               "  tilefoundry conformance run --backend mypkg.backend:factory --tier full "
               "--shard 1/3 --jsonl s1.jsonl\n"
               "  tilefoundry conformance run --backend ./my_backend.py:factory --cases "
               "'cast/*' --html report.html --repro-dir repro\n"
               "  tilefoundry conformance run --backend B --baseline known.json "
               "--flake-retries 2")
    _common(r, jsonl="tilefoundry-conformance.jsonl", timeout=60.0)
    r.add_argument("--tier", choices=("quick", "full"), default="quick",
                   help="quick (default: every op feature and cast boundary class, about a "
                        "minute) or full (a superset: the exhaustive sweeps)")
    keep = r.add_mutually_exclusive_group()
    keep.add_argument("--resume", action="store_true",
                      help="continue the run recorded in --jsonl: skip the cases it holds")
    keep.add_argument("--overwrite", action="store_true",
                      help="replace the results --jsonl holds (without it, or --resume, a "
                           "results file that is not empty is refused)")
    r.add_argument("--cases", action="append", metavar="GLOB",
                   help="only the case ids matching this fnmatch glob (repeatable)")
    r.add_argument("--shard", metavar="I/N",
                   help="run shard I of N (1-based): a stable partition of the selected cases "
                        "by case id; the N shards together run every case once")
    r.add_argument("--catalog", help="'package.module:function' building the catalog from a "
                                     "seed (default: the built-in catalog)")
    _campaign_options(r)
    r.add_argument("--flake-retries", type=int, default=0, metavar="K",
                   help="run a FAIL / CRASH / TIMEOUT / ERROR case again up to K times (each "
                        "in a fresh worker); one that passes on a later attempt is FLAKY "
                        "(default 0)")
    r.set_defaults(func=_run)
    f = csub.add_parser(
        "fuzz", help="run generated programs against a backend for N minutes",
        formatter_class=RAW,
        description="Run generated programs, drawn inside the backend's capabilities, until "
                    "the time is up; failing seeds are replayed first by the next run.",
        epilog="examples:\n"
               "  tilefoundry conformance fuzz --backend mypkg.backend:factory --minutes 5 -j 2\n"
               "  tilefoundry conformance fuzz --backend B --minutes 1 --seed 7 --no-db "
               "--repro-dir repro")
    _common(f, jsonl="tilefoundry-fuzz.jsonl", timeout=30.0)
    f.add_argument("--minutes", type=float, required=True, help="how long to draw programs")
    f.add_argument("--generator", help="'package.module:function' taking a seed and returning "
                                       "(module, entry, inputs) (default: the oracle's program "
                                       "generator; it draws only inside the backend's "
                                       "capabilities)")
    f.add_argument("--db", default=DEFAULT_FUZZ_DB, metavar="DIR",
                   help=f"the failing-program database (a hypothesis "
                        f"DirectoryBasedExampleDatabase): every FAIL's seed is saved here and "
                        f"replayed first by the next fuzz run of the same backend and generator "
                        f"(default {DEFAULT_FUZZ_DB})")
    f.add_argument("--no-db", action="store_true", help="neither replay nor save failing seeds")
    f.add_argument("--overwrite", action="store_true",
                   help="replace the results --jsonl holds (without it a results file that is "
                        "not empty is refused; a fuzz run is not resumed)")
    f.set_defaults(func=_fuzz)
    ls = csub.add_parser(
        "list", help="list the catalog's cases", formatter_class=RAW,
        description="Print the catalog's cases (id, family, tier, ops, dtypes; tab-separated) "
                    "and a count per family.",
        epilog="examples:\n  tilefoundry conformance list --tier quick --cases 'cast/*'\n"
               "  tilefoundry conformance list | cut -f2 | sort | uniq -c")
    ls.add_argument("--tier", choices=("quick", "full"), default="full")
    ls.add_argument("--seed", type=int, default=0)
    ls.add_argument("--cases", action="append", metavar="GLOB")
    ls.add_argument("--catalog")
    ls.add_argument("--backend", help="include the capability-directed cases of this backend's "
                                      "capabilities() (capability/<key>/<n>), as 'run' does")
    ls.add_argument("--capabilities", metavar="FILE",
                    help="include the capability-directed cases of this JSON capability set")
    ls.add_argument("--runnable", action="store_true",
                    help="only the cases the capabilities cover (each case is built to see "
                         "what it needs; needs --backend or --capabilities)")
    ls.set_defaults(func=_list)
    mg = csub.add_parser(
        "merge", help="merge the results of the shards of one run into one report",
        description="Merge the JSON-lines results of --shard 1/N .. N/N (or disjoint runs of "
                    "one backend and seed) into one results file and one report: the report "
                    "a single run of all their cases gives.",
        epilog="example: tilefoundry conformance merge s1.jsonl s2.jsonl s3.jsonl -o all.jsonl "
               "--baseline known.json",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    mg.add_argument("files", nargs="+", metavar="JSONL", help="the shards' results files")
    mg.add_argument("-o", "--jsonl", default="tilefoundry-conformance-merged.jsonl",
                    help="the merged results file (default "
                         "tilefoundry-conformance-merged.jsonl)")
    mg.add_argument("--overwrite", action="store_true",
                    help="replace the results -o holds (without it a results file that is "
                         "not empty is refused)")
    mg.add_argument("--junit", help="write a JUnit XML report here")
    mg.add_argument("--coverage", help="write the op x dtype coverage matrix here")
    mg.add_argument("--html", metavar="FILE", help="write a self-contained HTML report here")
    _campaign_options(mg)
    mg.set_defaults(func=_merge)
    df = csub.add_parser(
        "diff", help="what changed between two runs, case by case",
        description="Compare two results files case by case: regressions (a case that did not "
                    "fail and now does), fixes, other verdict changes, cases only in one. "
                    "Exit 1 when B has a regression.",
        epilog="example: tilefoundry conformance diff yesterday.jsonl today.jsonl")
    df.add_argument("a", metavar="A", help="the earlier results file")
    df.add_argument("b", metavar="B", help="the later results file")
    df.set_defaults(func=_diff)
    pr = csub.add_parser(
        "probe", help="derive a first capability set by running one tiny case per op x dtype",
        description="Run the smallest catalog case of every op x dtype x attribute "
                    "combination, structural feature and mesh shape against the backend, "
                    "claiming everything, and write the capability set its accepted cases "
                    "justify (PASS, FAIL, UNJUDGED: it ran; ERROR, CRASH, TIMEOUT, "
                    "NOT_SUPPORTED: rejected) as JSON, for 'run --capabilities FILE'.",
        epilog="example: tilefoundry conformance probe --backend mypkg.backend:factory -j 2 "
               "--out caps.json && tilefoundry conformance run --backend "
               "mypkg.backend:factory --capabilities caps.json")
    pr.add_argument("--backend", required=True, help="as for 'run'")
    pr.add_argument("--out", default="tilefoundry-capabilities.json", metavar="FILE",
                    help="where to write the capability set (default "
                         "tilefoundry-capabilities.json)")
    pr.add_argument("--tier", choices=("quick", "full"), default="quick",
                    help="the tier the probe cases are picked from (default quick)")
    pr.add_argument("-j", "--jobs", type=int, default=1, help="worker processes (default 1)")
    pr.add_argument("--timeout", type=float, default=30.0,
                    help="per-case time limit in seconds (default 30)")
    pr.add_argument("--seed", type=int, default=0)
    pr.add_argument("--catalog")
    pr.add_argument("--cases", action="append", metavar="GLOB",
                    help="probe only with the cases matching this glob (repeatable)")
    pr.add_argument("--jsonl", default="tilefoundry-probe.jsonl",
                    help="the probe cases' results (default tilefoundry-probe.jsonl)")
    pr.add_argument("--overwrite", action="store_true",
                    help="replace what --out and --jsonl hold (without it a file that is not "
                         "empty is refused)")
    pr.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None)
    pr.set_defaults(func=_probe)
    cv = csub.add_parser("coverage", help="what a tier exercises and what it leaves out",
                         description="Op features (op x dtype x attribute values x sharding "
                                     "pattern) and cast boundary classes a tier exercises, and "
                                     "its holes against the full tier plus the program pool.",
                         epilog="example: tilefoundry conformance coverage --tier quick "
                                "--limit 10")
    cv.add_argument("--tier", choices=("quick", "full"), default="quick")
    cv.add_argument("--limit", type=int, default=40, help="holes listed per kind (default 40)")
    cv.add_argument("--write-fill", action="store_true",
                    help="recompute the quick tier's fill (conformance/quick_fill.json) so it "
                         "has no holes")
    cv.set_defaults(func=_coverage)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _campaign_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--baseline", metavar="FILE",
                   help="known failures (JSON, each with a reason): fail only on a failure it "
                        "does not list; report the listed cases that pass now")
    p.add_argument("--write-baseline", metavar="FILE",
                   help="write this run's failures as a baseline (reasons kept from "
                        "--baseline where it lists the case)")


def _coverage(args: argparse.Namespace) -> int:
    from tilefoundry.conformance import coverage as cov
    from tilefoundry.conformance.catalog import build_catalog

    cat = build_catalog(0)
    if args.write_fill:
        fill = cov.write_fill(cat)
        print(f"{cov.fill_file()}: {len(fill['promote'])} full-tier case(s) promoted, "
              f"{len(fill['programs'])} pool program(s) added", file=sys.stderr)
        cat = build_catalog(0)
    tier = cov.coverage(cat.tier(args.tier))
    universe = cov.coverage(cov.universe_cases(cat))
    print(cov.report(tier, universe, args.tier, args.limit))
    op_h, cast_h = cov.holes(tier, universe)
    return 1 if (op_h or cast_h or tier.errors or universe.errors) else 0


def _err(msg: str) -> int:
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    return 2


def _prepare(args: argparse.Namespace):
    from tilefoundry.conformance.manifest import MAX_GLOB, Manifest
    from tilefoundry.conformance.results import _check_writable
    from tilefoundry.conformance.selection import ConformanceError

    long = next((g for g in getattr(args, "cases", None) or () if len(g) > MAX_GLOB), None)
    if long is not None:  # fnmatch's translation grows past linear in its brackets
        raise ConformanceError(f"--cases: a glob of {len(long):,} characters, more than "
                               f"{MAX_GLOB}; a case id or glob is shorter")
    manifest = Manifest.load(args.manifest) if args.manifest else None
    if getattr(args, "admit", None):
        from tilefoundry.oracle.relax import parse_admit

        adm = parse_admit(args.admit, origin="--admit")
        manifest = manifest if manifest is not None else Manifest(source="--admit")
        manifest.admit_all = adm
    if args.junit:
        _check_writable(Path(args.junit), "--junit")
    if args.coverage:
        _check_writable(Path(args.coverage), "--coverage")
    if getattr(args, "write_baseline", None):
        _check_writable(Path(args.write_baseline), "--write-baseline")
    if args.html:
        _check_writable(Path(args.html), "--html")
    if args.reduce and not args.repro_dir:
        raise ConformanceError("--reduce needs --repro-dir (the reduced program is written "
                               "there)")
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    return manifest, progress


def _caps_file(args: argparse.Namespace):
    from tilefoundry.conformance.backend import Capabilities

    return Capabilities.load(args.capabilities) if getattr(args, "capabilities", None) \
        else None


def _report(args: argparse.Namespace, result, what: str) -> int:
    """The terminal report and the outputs (JUnit, coverage, baseline, HTML); an output that
    cannot be written is one line and exit status 2 (the results file is complete)."""
    from tilefoundry.conformance.terminal import OutputError

    try:
        return _report_outputs(args, result, what)
    except OutputError as e:
        return _err(str(e))


def _report_outputs(args: argparse.Namespace, result, what: str) -> int:
    from tilefoundry.conformance.report import (
        failure_lines,
        judged_line,
        relaxation_table,
        summary_table,
        write_coverage,
        write_junit,
    )

    raw = result.records
    recs = terminal_records(raw)  # what a backend wrote, printable (terminal.py)
    if what == "merge":
        print(f"{PROG} merge: backend {result.backend!r}, seed {result.seed}, {len(recs)} "
              f"case(s) from {len(args.files)} file(s)")
    else:
        print(f"{PROG} {what}: backend {args.backend!r}, seed {args.seed}, {len(recs)} case(s) "
              f"in {result.wall_s:.1f} s with -j {args.jobs}")
    print(summary_table(recs))
    print(judged_line(recs))
    rt = relaxation_table(recs)
    if rt:
        print()
        print(rt)
    from tilefoundry.conformance.report_groups import grouped_failures, op_table, reason_lines

    for block in (op_table(recs), grouped_failures(recs), reason_lines(recs)):
        if block:
            print()
            print(block)
    bl = result.baseline
    bad = failure_lines(terminal_records(bl.new) if bl is not None else recs)
    if bad:
        print()
        if bl is not None:
            print(f"new failure(s), not in the baseline {args.baseline}:")
        print(bad)
    if bl is not None:
        print(f"\nbaseline {args.baseline}: {len(bl.known)} known failure(s), {len(bl.new)} "
              f"new, {len(bl.fixed)} fixed")
        for r, e in bl.fixed:
            print(f"FIXED    {r['id']}: {r['verdict']} now (the baseline lists {e.verdict}: "
                  f"{e.reason}); remove it from the baseline")
        for r, e in bl.changed:
            print(f"CHANGED  {r['id']}: {r['verdict']} now, the baseline lists {e.verdict} "
                  f"({e.reason})")
    for e in result.unused_manifest:
        print(f"{PROG}: warning: manifest [[{e.kind}]] entry {e.case!r} matches no case",
              file=sys.stderr)
    if result.recycled:
        print(f"{PROG}: {result.recycled} worker(s) replaced after growing beyond the memory "
              f"limit (a leaking backend?)", file=sys.stderr)
    if args.junit:
        with writing("--junit", args.junit):
            write_junit(raw, args.junit, properties={"backend": args.backend,
                                                     "seed": args.seed})
    if args.coverage:
        with writing("--coverage", args.coverage):
            write_coverage(raw, args.coverage)
    if getattr(args, "write_baseline", None):
        from tilefoundry.conformance.campaign import Baseline, write_baseline

        old = Baseline.load(args.baseline) if getattr(args, "baseline", None) else None
        with writing("--write-baseline", args.write_baseline):
            n = write_baseline(args.write_baseline, raw, result.backend, old)
        print(f"{PROG}: wrote {n} known failure(s) to {args.write_baseline} (edit each "
              f"'reason')", file=sys.stderr)
    c = result.counts()
    if bl is not None:
        c = c | {v: sum(r["verdict"] == v for r in bl.new)
                 for v in ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS")}
    worst = [f"{c[v]} {v}" for v in ("FAIL", "CRASH", "TIMEOUT", "ERROR", "XPASS") if c[v]]
    if bl is not None and worst:
        worst[0] = "new: " + worst[0]
    flaky = result.counts().get("FLAKY", 0)
    verdict = "FAIL (" + ", ".join(worst) + ")" if worst else \
        f"NOTHING JUDGED ({result.vacuous})" if result.vacuous else \
        f"UNJUDGED ({c['UNJUDGED']} case(s) not fully judged, each named above by reason; " \
        f"no failures)" if c["UNJUDGED"] \
        else f"ADMITTED ({c['ADMITTED']} case(s) pass only under the declared relaxations; " \
             f"no failures)" if c.get("ADMITTED") else "PASS"
    if verdict == "PASS" and bl is not None and bl.known:
        verdict = f"PASS (no new failure; {len(bl.known)} known)"
    if flaky:
        verdict += f"; {flaky} FLAKY"
    warned = [r for r in recs if r.get("warnings")]
    if warned:
        where = collections.Counter(w["where"] + " " + w["category"] for r in warned
                                    for w in r["warnings"])
        print(f"\n{len(warned)} case(s) raised warnings, recorded on each case ('warnings' in "
              f"the JSON lines): " + ", ".join(f"{k} ({n} case(s))"
                                              for k, n in where.most_common(3)))
    from tilefoundry.conformance.report import paint, use_colour

    shown = verdict.split(" ", 1)[0]
    verdict = paint(shown, {"NOTHING": "FAIL"}.get(shown, shown), use_colour(sys.stdout)) + \
        verdict[len(shown):]
    print(f"\nresult: {verdict}; results in "
          f"{result.jsonl}" + (f", reproducers in {args.repro_dir}" if args.repro_dir and
                               any(r.get('repro') for r in recs) else ""))
    if getattr(args, "html", None):
        from tilefoundry.conformance.html_report import write_html

        with writing("--html", args.html):
            write_html(raw, args.html,
                       title=f"tilefoundry conformance {what}: {result.backend}",
                       meta=f"backend {result.backend!r}, seed {result.seed}, {len(recs)} "
                            f"case(s)" + (f", {result.wall_s:.1f} s" if result.wall_s else ""),
                       result=verdict)
        print(f"HTML report: {args.html}")
    return result.exit_code


def _run(args: argparse.Namespace) -> int:
    from tilefoundry.conformance import runner, selection

    try:
        manifest, progress = _prepare(args)
        shard = selection.parse_shard(args.shard) if args.shard else None
        baseline = _load_baseline(args)
        result = runner.run(args.backend, args.tier, jobs=args.jobs, timeout_s=args.timeout,
                            seed=args.seed, out_jsonl=Path(args.jsonl), resume=args.resume,
                            manifest=manifest, repro_dir=args.repro_dir, progress=progress,
                            catalog=args.catalog, case_globs=args.cases, reduce_s=args.reduce,
                            shard=shard, baseline=baseline,
                            flake_retries=args.flake_retries, caps_override=_caps_file(args),
                            executor=args.executor, ray_address=args.address,
                            overwrite=args.overwrite, start_method=args.start_method,
                            memory_limit_mb=args.memory_limit)
    except TilefoundryError as e:
        return _err(str(e))
    except OSError as e:  # a full disk, a removed directory: one line (terminal.py)
        return _err(str(results_write_error(e, args.jsonl)))
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; the finished cases are in {args.jsonl}; continue with "
              f"--resume", file=sys.stderr)
        return 130
    return _report(args, result, "run")


def _load_baseline(args: argparse.Namespace):
    from tilefoundry.conformance.campaign import Baseline

    return Baseline.load(args.baseline) if getattr(args, "baseline", None) else None


def _merge(args: argparse.Namespace) -> int:
    from tilefoundry.conformance import campaign, results

    try:
        if args.junit:
            results._check_writable(Path(args.junit), "--junit")
        if args.coverage:
            results._check_writable(Path(args.coverage), "--coverage")
        if args.write_baseline:
            results._check_writable(Path(args.write_baseline), "--write-baseline")
        if args.html:
            results._check_writable(Path(args.html), "--html")
        out = Path(args.jsonl)
        if any(os.path.realpath(f) == os.path.realpath(out) for f in args.files):
            raise campaign.CampaignError(f"merge: -o {out} is one of the input files")
        results._check_writable(out, "-o")
        if not args.overwrite:
            refuse_existing_results(out, campaign.CampaignError, resume=False, flag="-o")
        merged = campaign.merge_results(args.files)
        baseline = _load_baseline(args)
        if baseline is not None:
            baseline.check_ids(r["id"] for r in merged.records)
    except TilefoundryError as e:
        return _err(str(e))
    result = results.RunResult(merged.header.get("backend", "?"), merged.header.get("seed", 0),
                              merged.records, out, merged.header,
                              baseline=baseline.apply(merged.records) if baseline else None)
    campaign.write_merged(out, merged, {
        "type": "summary", "cases": len(merged.records), "counts": dict(result.counts()),
        "exit_code": result.exit_code, "vacuous": result.vacuous, "stopped": False,
        "shard": None, "merged": len(args.files),
        "baseline": result.baseline.to_json() if result.baseline else None})
    args.backend, args.seed, args.repro_dir = result.backend, result.seed, None
    return _report(args, result, "merge")


def _diff(args: argparse.Namespace) -> int:
    from tilefoundry.conformance import campaign

    try:
        ha, a = campaign.read_records(args.a)
        hb, b = campaign.read_records(args.b)
    except TilefoundryError as e:
        return _err(str(e))
    d = campaign.diff_runs(a, b)
    for k in ("backend", "seed"):
        if ha.get(k) != hb.get(k):
            print(f"note: {k} differs: {ha.get(k)!r} in A, {hb.get(k)!r} in B")
    msgs = {cid: printable(str(r.get("message", ""))) for cid, r in b.items()}
    print("\n".join(d.lines("A", "B", msgs)))
    return 1 if d.regressed else 0


def fuzz_db_key(backend_spec: str, generator: str | None, caps) -> bytes:
    """The failing-program database key of a fuzz run: the backend, the generator and the
    capabilities it draws inside (a seed rebuilds its program only under all three)."""
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(caps.to_json(), sort_keys=True).encode()).hexdigest()
    return f"tilefoundry-fuzz\0{backend_spec}\0{generator or DEFAULT_GENERATOR}\0" \
           f"{digest[:16]}".encode()


def _open_fuzz_db(args: argparse.Namespace):
    from hypothesis.database import DirectoryBasedExampleDatabase

    from tilefoundry.conformance.results import _check_writable

    if args.no_db:
        return None
    _check_writable(Path(args.db), "--db", directory=True)
    return DirectoryBasedExampleDatabase(args.db)


def _fuzz(args: argparse.Namespace) -> int:
    from tilefoundry.conformance import runner, selection
    from tilefoundry.conformance.loaders import fuzz_db_seeds

    try:
        if not args.minutes > 0:
            raise selection.ConformanceError(f"--minutes: expected a positive number, got "
                                          f"{args.minutes}")
        if not args.overwrite:  # a fuzz run is not resumed: only --overwrite replaces it
            refuse_existing_results(Path(args.jsonl), selection.ConformanceError, resume=False)
        manifest, progress = _prepare(args)
        override = _caps_file(args)
        _, caps = selection._load_backend_checked(args.backend, override)  # names checked first
        gen = selection.load_generator(args.generator, caps=caps)
        db = _open_fuzz_db(args)
        key = fuzz_db_key(args.backend, args.generator, caps)
        replay = fuzz_db_seeds(db, key) if db is not None else []  # a bad entry: a warning
        cases = selection.GeneratedCases(gen, args.seed, replay=replay)
        result = runner.run(args.backend, cases, jobs=args.jobs, timeout_s=args.timeout,
                            seed=args.seed, out_jsonl=Path(args.jsonl), manifest=manifest,
                            repro_dir=args.repro_dir, progress=progress,
                            reduce_s=args.reduce,
                            budget_s=60.0 * args.minutes, caps_override=override,
                            executor=args.executor, ray_address=args.address,
                            start_method=args.start_method,
                            memory_limit_mb=args.memory_limit)
    except TilefoundryError as e:
        return _err(str(e))
    except OSError as e:  # a full disk, a removed directory: one line (terminal.py)
        return _err(str(results_write_error(e, args.jsonl)))
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; the finished cases are in {args.jsonl}",
              file=sys.stderr)
        return 130
    rc = _report(args, result, "fuzz")
    recs = result.records
    n = len(recs)
    ns = sum(r["verdict"] == "NOT_SUPPORTED" for r in recs)
    print(f"fuzz: {n} program(s) drawn inside the backend's capabilities, {ns} NOT_SUPPORTED "
          f"({100.0 * ns / max(n, 1):.1f} %), {n / max(result.wall_s, 1e-9):.1f} programs/s")
    if db is not None:
        saved = replayed_fail = fixed = 0
        for r in recs:
            s = cases.case_seed(r["id"])
            if s is None:
                continue
            value = str(s).encode()
            was_saved = r["id"].startswith("fuzz/replay/")
            if r["verdict"] == "FAIL":
                replayed_fail += was_saved
                saved += not was_saved
                db.save(key, value)
            elif was_saved and r["verdict"] == "PASS":
                fixed += 1
                db.delete(key, value)  # it passes now: no longer a failing program
        ran = sum(r["id"].startswith("fuzz/replay/") for r in recs)
        print(f"fuzz database {args.db}: replayed {ran} of {len(replay)} saved failing "
              f"program(s) first ({replayed_fail} still FAIL, {fixed} now PASS and dropped); "
              f"saved {saved} new failing seed(s)")
    return rc


def _probe(args: argparse.Namespace) -> int:
    from tilefoundry.conformance import probe, results, selection

    try:
        if not args.overwrite:  # before --out is touched: a refusal leaves nothing behind
            refuse_existing_results(Path(args.out), selection.ConformanceError, resume=False,
                                    flag="--out")
            refuse_existing_results(Path(args.jsonl), selection.ConformanceError, resume=False)
        results._check_writable(Path(args.out), "--out")
        progress = sys.stderr.isatty() if args.progress is None else args.progress
        res = probe.probe(args.backend, tier=args.tier, seed=args.seed, jobs=args.jobs,
                          timeout_s=args.timeout, work_jsonl=args.jsonl, catalog=args.catalog,
                          case_globs=args.cases, progress=progress)
    except TilefoundryError as e:
        return _err(str(e))
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted; nothing written", file=sys.stderr)
        return 130
    probe.write(args.out, res)
    claiming, rej = res.claiming, res.rejected
    print(f"{PROG} probe: backend {args.backend!r}: {len(res.cases)} probe case(s) from tier "
          f"{args.tier!r}: {len(claiming)} deciding the claims ({len(claiming) - len(rej)} "
          f"accepted, {len(rej)} rejected), {len(res.cases) - len(claiming)} edge case(s) "
          f"for the findings")
    print(printable("\n".join(probe.report_lines(res))))
    print(f"\nwrote {args.out}; judge with: tilefoundry conformance run --backend "
          f"{args.backend} --capabilities {args.out}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from collections import Counter

    from tilefoundry.conformance import selection

    try:
        caps = None
        if args.backend or args.capabilities:
            over = _caps_file(args)
            caps = selection._load_backend_checked(args.backend, over)[1] if args.backend else \
                selection.validate_capabilities(over, "--capabilities")
        elif args.runnable:
            return _err("--runnable: name the capabilities (--backend or --capabilities)")
        cases = selection.select_cases(selection.load_catalog(args.seed, catalog=args.catalog,
                                                        backend_caps=caps),
                                    args.tier, args.cases)
    except TilefoundryError as e:
        return _err(str(e))
    if args.runnable:
        from tilefoundry.conformance.backend import requirements, unsupported_reason

        def covered(c) -> bool:
            try:
                return unsupported_reason(caps, requirements(c.build()[0])) is None
            except Exception:  # a case that does not build: the run reports it (harness:)
                return False

        cases = [c for c in cases if covered(c)]
    for c in cases:
        print(f"{c.id}\t{c.family}\t{c.tier}\t{','.join(c.ops)}\t{','.join(c.dtypes)}")
    fams = Counter(c.family for c in cases)
    print(f"{len(cases)} case(s) in tier {args.tier!r}"
          + (" the capabilities cover" if args.runnable else "") + ": "
          + ", ".join(f"{f} {n}" for f, n in sorted(fams.items())), file=sys.stderr)
    return 0
