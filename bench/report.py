"""The benchmark's table (markdown), its plot (PNG), and the machine it ran on."""

from __future__ import annotations

import os
import platform
from pathlib import Path

#: The app variants of the sweep, in the order the tables give them: the shop's, then the
#: lean app's (bench/lean.py).
VARIANTS = ("tokens", "baseline", "floor", "nonce", "lean_once", "lean", "lean_floor")
#: Each protected variant and its floor (bare SET + GETDEL in the same app); the targets:
#: app CPU per order above the floor at most TARGET_CPU_SHARE of the floor's, throughput
#: at least TARGET_RATIO of the floor's.
FLOORS = {"tokens": "floor", "lean_once": "lean_floor"}
TARGET_CPU_SHARE, TARGET_RATIO = 0.05, 0.95


def percentiles(latencies: list[float]) -> dict[str, float]:
    """p50/p95/p99 in milliseconds (nearest rank)."""
    ordered = sorted(latencies)
    if not ordered:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000  # noqa: E731
    return {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99)}


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.1f} GiB RAM"
    except (OSError, ValueError):
        memory = ""
    return f"{model}, {os.cpu_count()} cores{memory}, {platform.system()} {platform.release()}"


def _rate(run: dict) -> float:
    return run["orders"] / run["seconds"] if run["seconds"] else 0.0


def _cpu(run: dict) -> float:
    """Milliseconds of app CPU per order."""
    return run["app_cpu"] / max(run["orders"], 1) * 1000


def _pooled(runs: list[dict]) -> dict:
    """Runs summed: every level's runs of one variant give equal time to each level."""
    return {
        "orders": sum(r["orders"] for r in runs),
        "seconds": sum(r["seconds"] for r in runs),
        "latencies": [x for r in runs for x in r["latencies"]],
        "form_latencies": [x for r in runs for x in r.get("form_latencies", [])],
        "failures": sum(r["failures"] for r in runs),
        "app_cpu": sum(r["app_cpu"] for r in runs),
        "redis": {
            k: sum(r["redis"].get(k, 0) for r in runs)
            for k in {k for r in runs for k in r["redis"]}
        },
    }


def _select(runs: list[dict], **match: object) -> list[dict]:
    return [r for r in runs if all(r.get(k) == v for k, v in match.items())]


def _repeat(result: list) -> bool:
    """Whether a storm's answer landed on the order rather than placing it: told in the
    session (bench/load.py), or, in results saved before that, by ?already_placed=1."""
    return bool(result[3]) if len(result) > 3 else "already_placed" in result[2]


def storm_summary(storm: dict) -> dict:
    results = storm["results"]
    statuses = {r[1] for r in results}
    places = {r[2].split("?")[0] for r in results}
    first = [r for r in results if r[2] and not _repeat(r)]
    duplicates = [r[0] for r in results if _repeat(r)]
    return {
        "variant": storm.get("variant", "tokens"),
        "posts": len(results),
        "all_303": statuses == {303},
        "one_place": len(places) == 1,
        "fresh": len(first),
        "orders": storm["orders_created"],
        "first_ms": first[0][0] * 1000 if first else float("nan"),
        "dup": percentiles(duplicates),
    }


def figures(results: dict) -> dict[str, list[float]]:
    """Every headline figure, one value per repetition of the sweep."""
    out: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        out.setdefault(name, []).append(value)

    for rep in range(results["repetitions"]):
        pooled = {v: _pooled(_select(results["runs"], variant=v, repetition=rep)) for v in VARIANTS}
        for v, run in pooled.items():
            add(f"orders_per_s.{v}", _rate(run))
            add(f"app_cpu_ms.{v}", _cpu(run))
            p = percentiles(run["latencies"])
            add(f"cycle_p50_ms.{v}", p["p50"])
            add(f"cycle_p99_ms.{v}", p["p99"])
            add(f"form_p50_ms.{v}", percentiles(run["form_latencies"])["p50"])
        base = pooled["baseline"]
        for v in ("tokens", "floor", "nonce"):
            add(f"ratio.{v}", _rate(pooled[v]) / max(_rate(base), 1e-9))
            add(f"overhead_cpu_ms.{v}", _cpu(pooled[v]) - _cpu(base))
            add(
                f"overhead_form_p50_ms.{v}",
                out[f"form_p50_ms.{v}"][-1] - out["form_p50_ms.baseline"][-1],
            )
        for v, under in (*FLOORS.items(), ("lean_floor", "lean")):
            add(f"ratio.{v}_to_{under}", _rate(pooled[v]) / max(_rate(pooled[under]), 1e-9))
            over = _cpu(pooled[v]) - _cpu(pooled[under])
            add(f"overhead_cpu_ms.{v}_over_{under}", over)
            add(f"overhead_cpu_pct.{v}_over_{under}", 100 * over / max(_cpu(pooled[under]), 1e-9))
    for v, trips in results.get("pg_round_trips", {}).items():
        for count in trips:
            add(f"pg_round_trips_per_post.{v}", count)
    # Round trips from MONITOR (bench/run.py): what a client sent, apart from what a
    # script ran; INFO commandstats counts both alike.
    for row in results["round_trips"]:
        v, orders = row["variant"], max(row["orders"], 1)
        add(f"redis_round_trips_per_order.{v}", sum(row["sent"].values()) / orders)
        add(f"redis_scripted_per_order.{v}", sum(row["scripted"].values()) / orders)
    # per command, 0 in a repetition that sent none
    for row in results["round_trips"]:
        v, orders = row["variant"], max(row["orders"], 1)
        for kind in ("sent", "scripted"):
            names = {n for r in results["round_trips"] if r["variant"] == v for n in r[kind]}
            for name in names:
                add(f"redis_{kind}.{v}.{name}", row[kind].get(name, 0) / orders)
    for storm in results["storms"]:
        summary = storm_summary(storm)
        v = summary["variant"]
        add(f"storm.{v}.orders", summary["orders"])
        add(f"storm.{v}.all_on_one", float(summary["all_303"] and summary["one_place"]))
        add(f"storm.{v}.first_ms", summary["first_ms"])
        add(f"storm.{v}.dup_p50_ms", summary["dup"]["p50"])
        add(f"storm.{v}.dup_p99_ms", summary["dup"]["p99"])
    return out


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": _median(values), "max": max(values)}


def _f(values: list[float], digits: int = 1, bold: bool = False) -> str:
    """median (min – max): the median decides, the range shows the noise."""
    s = spread(values)
    median = f"{s['median']:.{digits}f}"
    return (
        f"**{median}**" if bold else median
    ) + f" ({s['min']:.{digits}f} – {s['max']:.{digits}f})"


def as_json(results: dict) -> dict:
    """latest.json: one entry per variant and level (summed over the repetitions, each
    repetition's own figures beside), the figures' min / median / max, the storms."""
    entries = []
    for v in VARIANTS:
        for level in results["levels"]:
            mine = _select(results["runs"], variant=v, concurrency=level)
            pooled = _pooled(mine)
            entries.append(
                {
                    "variant": v,
                    "concurrency": level,
                    "orders": pooled["orders"],
                    "seconds": round(pooled["seconds"], 3),
                    "app_cpu": round(pooled["app_cpu"], 3),
                    "redis": pooled["redis"],
                    "failures": pooled["failures"],
                    "p": percentiles(pooled["latencies"]),
                    "form_p": percentiles(pooled["form_latencies"]),
                    "repetitions": [
                        {k: r[k] for k in ("repetition", "orders", "seconds", "app_cpu", "redis")}
                        for r in mine
                    ],
                }
            )
    return {
        **{k: v for k, v in results.items() if k not in ("runs", "storms")},
        "runs": entries,
        "figures": {name: spread(values) for name, values in figures(results).items()},
        "storms": [storm_summary(s) | {"repetition": s["repetition"]} for s in results["storms"]],
    }


def _verdict(f: dict[str, list[float]]) -> str:
    """The targets against each floor, on the medians."""
    met = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    parts = []
    for v, under in FLOORS.items():
        share = _median(f[f"overhead_cpu_pct.{v}_over_{under}"])
        over = _median(f[f"overhead_cpu_ms.{v}_over_{under}"])
        ratio = _median(f[f"ratio.{v}_to_{under}"])
        cpu_ok = share <= TARGET_CPU_SHARE * 100
        parts.append(
            f"{v} − {under} {over:.2f} ms of app CPU per order = {share:.1f} % of "
            f"{under}'s (≤ {TARGET_CPU_SHARE:.0%}: {met(cpu_ok)}); "
            f"{v} / {under} {ratio:.3f} in orders/s (≥ {TARGET_RATIO}: "
            f"{met(ratio >= TARGET_RATIO)})"
        )
    trips = _median(f["redis_round_trips_per_order.tokens"])
    return (
        f"Targets, on the medians: {'; '.join(parts)}; {trips:.2f} Redis round trips per "
        f"order of tokens (2: {met(round(trips, 2) == 2)})."
    )


def _pg(f: dict[str, list[float]], v: str) -> str:
    name = f"pg_round_trips_per_post.{v}"
    return _f(f[name], 0) if name in f else "–"


def _redis(f: dict[str, list[float]], v: str, bold: bool = False) -> str:
    """Round trips per order, each command sent, and what a script ran inside them."""
    cell = _f(f[f"redis_round_trips_per_order.{v}"], 2, bold)
    sent = sorted(n.split(".")[-1] for n in f if n.startswith(f"redis_sent.{v}."))
    if sent:
        cell += ": " + ", ".join(f"{n} {_median(f[f'redis_sent.{v}.{n}']):.2f}" for n in sent)
    scripted = sorted(n.split(".")[-1] for n in f if n.startswith(f"redis_scripted.{v}."))
    if scripted:
        cell += (
            f"; the script ran {_f(f[f'redis_scripted_per_order.{v}'], 2)} commands "
            "inside ("
            + ", ".join(f"{n} {_median(f[f'redis_scripted.{v}.{n}']):.2f}" for n in scripted)
            + ")"
        )
    return cell


def markdown(results: dict) -> str:
    f = figures(results)
    reps = results["repetitions"]
    levels = ", ".join(str(c) for c in results["levels"])
    memory = results["memory"]
    rows = {row["pattern"]: row for row in results["claims"]}
    ours = rows["GETDEL (ours)"]
    lines = [
        f"Machine: {results['machine']}; Python {results['python']}; gunicorn "
        f"-w {results['workers']} --threads {results['threads']}; PostgreSQL 16 (fsync off) "
        f"and Redis 6.2 on the same machine; load from separate processes on 127.0.0.1; "
        f"{results['seconds']:g} s per variant and level in {results['rounds']} alternating "
        f"runs, the whole sweep repeated {reps} times; load average {results['load'][0]:.1f} "
        f"at the start, {results['load'][1]:.1f} at the end; {results['when']}; took "
        f"{results['duration_s']} s.",
        "",
        f"Command: `{results['command'].strip()}`; code: {results.get('code', 'unknown')}",
        "",
        f"Each cell: **median** (min – max) over the {reps} repetitions. *tokens* = this "
        "pattern (Redis SET at render, advisory lock + GETDEL at submit); *baseline* = the "
        "same app with no once-only protection at all; *signed nonce* = no Redis: an HMAC-"
        "signed nonce in the form and the UNIQUE column decides (bench/nonce.py); *floor* = "
        "the baseline plus one bare SET at render and one bare GETDEL at submit, sent through "
        "the app's redis-py client as the token store sends its own, nothing else "
        "(bench/app.py): what asking Redis at all costs on this machine, the least any "
        "Redis-backed token can cost.",
        "",
        _verdict(f),
        "",
        "| figure | tokens | baseline | floor | signed nonce |",
        "|---|---|---|---|---|",
        f"| orders/s, full cycle (GET form → POST → follow 303), all levels ({levels} users) "
        f"| {_f(f['orders_per_s.tokens'])} | {_f(f['orders_per_s.baseline'])} "
        f"| {_f(f['orders_per_s.floor'])} | {_f(f['orders_per_s.nonce'])} |",
        f"| throughput ratio to baseline "
        f"| {_f(f['ratio.tokens'], 3, True)} | 1 | {_f(f['ratio.floor'], 3, True)} "
        f"| {_f(f['ratio.nonce'], 3)} |",
        f"| throughput ratio to the floor (target ≥ 0.95 for tokens) "
        f"| {_f(f['ratio.tokens_to_floor'], 3, True)} | | 1 | |",
        f"| app CPU per order, gunicorn workers (ms; least sensitive to other load) "
        f"| {_f(f['app_cpu_ms.tokens'], 2)} | {_f(f['app_cpu_ms.baseline'], 2)} "
        f"| {_f(f['app_cpu_ms.floor'], 2)} | {_f(f['app_cpu_ms.nonce'], 2)} |",
        f"| CPU overhead per order vs baseline (ms) "
        f"| {_f(f['overhead_cpu_ms.tokens'], 2, True)} | 0 "
        f"| {_f(f['overhead_cpu_ms.floor'], 2)} | {_f(f['overhead_cpu_ms.nonce'], 2)} |",
        f"| CPU per order above the floor, ms and % of the floor's (target ≤ 5 % for tokens) "
        f"| {_f(f['overhead_cpu_ms.tokens_over_floor'], 2, True)}; "
        f"{_f(f['overhead_cpu_pct.tokens_over_floor'], 1, True)} % | | 0 | |",
        f"| render: p50 GET /orders/new (ms) | {_f(f['form_p50_ms.tokens'], 2)} "
        f"| {_f(f['form_p50_ms.baseline'], 2)} | {_f(f['form_p50_ms.floor'], 2)} "
        f"| {_f(f['form_p50_ms.nonce'], 2)} |",
        f"| render overhead vs baseline, p50 (ms) "
        f"| {_f(f['overhead_form_p50_ms.tokens'], 2, True)} | 0 "
        f"| {_f(f['overhead_form_p50_ms.floor'], 2)} "
        f"| {_f(f['overhead_form_p50_ms.nonce'], 2)} |",
        f"| cycle latency p50 / p99 (ms), all levels "
        f"| {_f(f['cycle_p50_ms.tokens'])} / {_f(f['cycle_p99_ms.tokens'])} "
        f"| {_f(f['cycle_p50_ms.baseline'])} / {_f(f['cycle_p99_ms.baseline'])} "
        f"| {_f(f['cycle_p50_ms.floor'])} / {_f(f['cycle_p99_ms.floor'])} "
        f"| {_f(f['cycle_p50_ms.nonce'])} / {_f(f['cycle_p99_ms.nonce'])} |",
        f"| PostgreSQL round trips per first POST (on the wire, pool pre-pings included) "
        f"| {_pg(f, 'tokens')} | {_pg(f, 'baseline')} | {_pg(f, 'floor')} | {_pg(f, 'nonce')} |",
        f"| Redis round trips per successful order (target 2 for tokens; MONITOR, "
        f"{results['round_trips'][0]['orders']} orders a repetition) "
        f"| {_redis(f, 'tokens', True)} | {_redis(f, 'baseline')} | {_redis(f, 'floor')} "
        f"| {_redis(f, 'nonce')} |",
        f"| storm: {storm_summary(results['storms'][0])['posts']} concurrent POSTs of one form: "
        f"orders created; all 303 to one order | {_f(f['storm.tokens.orders'], 0)}; "
        f"{'yes' if min(f['storm.tokens.all_on_one']) else '**no**'} | | "
        f"| {_f(f['storm.nonce.orders'], 0)}; "
        f"{'yes' if min(f['storm.nonce.all_on_one']) else '**no**'} |",
        f"| storm: first answered (ms) | {_f(f['storm.tokens.first_ms'], 0)} | | "
        f"| {_f(f['storm.nonce.first_ms'], 0)} |",
        f"| storm: duplicates answered, p50 / p99 (ms) "
        f"| {_f(f['storm.tokens.dup_p50_ms'], 0)} / {_f(f['storm.tokens.dup_p99_ms'], 0, True)} "
        f"| | | {_f(f['storm.nonce.dup_p50_ms'], 0)} / {_f(f['storm.nonce.dup_p99_ms'], 0)} |",
        f"| Redis bytes per live token, MEMORY USAGE over {memory['tokens']} keys "
        f"| {memory['memory_usage_avg']:.0f} (key {memory['key_length']} chars, value "
        f'"1", TTL) | | | none |',
        "",
        "The lean app (bench/lean.py: Flask-WTF, Jinja, Flask-SQLAlchemy, a UNIQUE column, "
        "PRG, as a user writes it), in the same run: *lean + library* = the library's README "
        "pattern; *lean* = no protection; *lean + 2 bare Redis commands* = its floor.",
        "",
        "| figure | lean + library | lean | lean + 2 bare Redis commands |",
        "|---|---|---|---|",
        f"| orders/s, full cycle, all levels | {_f(f['orders_per_s.lean_once'])} "
        f"| {_f(f['orders_per_s.lean'])} | {_f(f['orders_per_s.lean_floor'])} |",
        f"| throughput ratio to the floor (target ≥ 0.95 for lean + library) "
        f"| {_f(f['ratio.lean_once_to_lean_floor'], 3, True)} | "
        f"{1 / _median(f['ratio.lean_floor_to_lean']):.3f} (median) | 1 |",
        f"| app CPU per order (ms) | {_f(f['app_cpu_ms.lean_once'], 2)} "
        f"| {_f(f['app_cpu_ms.lean'], 2)} | {_f(f['app_cpu_ms.lean_floor'], 2)} |",
        f"| CPU per order above the floor, ms and % of the floor's (target ≤ 5 %) "
        f"| {_f(f['overhead_cpu_ms.lean_once_over_lean_floor'], 2, True)}; "
        f"{_f(f['overhead_cpu_pct.lean_once_over_lean_floor'], 1, True)} % | "
        f"| 0 (floor − lean: {_f(f['overhead_cpu_ms.lean_floor_over_lean'], 2)}) |",
        f"| PostgreSQL round trips per first POST | {_pg(f, 'lean_once')} | {_pg(f, 'lean')} "
        f"| {_pg(f, 'lean_floor')} |",
        f"| Redis round trips per successful order | {_redis(f, 'lean_once')} "
        f"| {_redis(f, 'lean')} | {_redis(f, 'lean_floor')} |",
        f"| cycle latency p50 / p99 (ms) "
        f"| {_f(f['cycle_p50_ms.lean_once'])} / {_f(f['cycle_p99_ms.lean_once'])} "
        f"| {_f(f['cycle_p50_ms.lean'])} / {_f(f['cycle_p99_ms.lean'])} "
        f"| {_f(f['cycle_p50_ms.lean_floor'])} / {_f(f['cycle_p99_ms.lean_floor'])} |",
        "",
        "The claim step alone, same Redis, a fresh key per claim (the first submit's path):",
        "",
        f"| pattern | Redis round trips per claim | claims/s, one connection "
        f"| claims/s, {ours['threads']} threads |",
        "|---|---|---|---|",
    ]
    for row in results["claims"]:
        lines.append(
            f"| {row['pattern']} | {row['round_trips']:.2f} "
            f"| {row['serial_per_s']:.0f} | {row['parallel_per_s']:.0f} |"
        )
    lines += [
        "",
        "Per level (medians over the repetitions):",
        "",
        f"| users | orders/s {' / '.join(VARIANTS)} | ratio tokens | ratio floor | "
        f"app CPU ms/order {' / '.join(VARIANTS)} | failed cycles |",
        "|---|---|---|---|---|---|",
    ]
    for level in results["levels"]:
        per = {
            v: [
                _select(results["runs"], variant=v, concurrency=level, repetition=r)[0]
                for r in range(reps)
            ]
            for v in VARIANTS
        }
        rate = {v: _median([_rate(r) for r in runs]) for v, runs in per.items()}
        cpu = {v: _median([_cpu(r) for r in runs]) for v, runs in per.items()}
        failed = {v: sum(r["failures"] for r in runs) for v, runs in per.items()}
        ratio = {
            v: _median(
                [
                    _rate(t) / max(_rate(b), 1e-9)
                    for t, b in zip(per[v], per["baseline"], strict=True)
                ]
            )
            for v in ("tokens", "floor")
        }
        lines.append(
            f"| {level} | {' / '.join(f'{rate[v]:.1f}' for v in VARIANTS)} "
            f"| {ratio['tokens']:.3f} | {ratio['floor']:.3f} "
            f"| {' / '.join(f'{cpu[v]:.2f}' for v in VARIANTS)} "
            f"| {' / '.join(str(failed[v]) for v in VARIANTS)} |"
        )
    return "\n".join(lines) + "\n"


def plot(runs: list[dict], path: Path) -> None:
    """orders/s against concurrency, one line per variant (median over repetitions,
    the bars span min to max)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = sorted({r["concurrency"] for r in runs})
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    styles = {
        "tokens": ("o", "-", "with tokens"),
        "baseline": ("s", "--", "baseline (no tokens)"),
        "floor": ("v", "-.", "floor: bare SET + GETDEL"),
        "nonce": ("^", ":", "signed nonce + UNIQUE (no Redis)"),
        "lean_once": ("D", "-", "lean app + library"),
        "lean": ("x", "--", "lean app"),
        "lean_floor": ("+", "-.", "lean app + bare SET + GETDEL"),
    }
    for variant, (marker, line, label) in styles.items():
        rates = [[_rate(r) for r in _select(runs, variant=variant, concurrency=c)] for c in levels]
        medians = [_median(r) for r in rates]
        ax.errorbar(
            levels,
            medians,
            yerr=[
                [m - min(r) for m, r in zip(medians, rates, strict=True)],
                [max(r) - m for m, r in zip(medians, rates, strict=True)],
            ],
            marker=marker,
            linestyle=line,
            capsize=3,
            label=label,
        )
    ax.set_xlabel("concurrent users")
    ax.set_ylabel("orders/s (GET form → POST → 303 → GET)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
