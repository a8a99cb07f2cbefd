"""The benchmark's table (markdown), its plot (PNG), and the machine it ran on."""

from __future__ import annotations

import os
import platform
from pathlib import Path


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


def _pairs(runs: list[dict]) -> list[tuple[int, dict, dict]]:
    by = {(run["variant"], run["concurrency"]): run for run in runs}
    levels = sorted({run["concurrency"] for run in runs})
    return [(c, by[("tokens", c)], by[("baseline", c)]) for c in levels]


def _ms(p: dict[str, float]) -> str:
    return f"{p['p50']:.1f} / {p['p95']:.1f} / {p['p99']:.1f}"


def storm_summary(storm: dict) -> dict:
    results = storm["results"]
    statuses = {status for _, status, _ in results}
    places = {location.split("?")[0] for _, _, location in results}
    first = [r for r in results if r[2] and "already_placed" not in r[2]]
    duplicates = [r[0] for r in results if "already_placed" in r[2]]
    return {"posts": len(results), "all_303": statuses == {303}, "one_place": len(places) == 1,
            "fresh": len(first), "orders": storm["orders_created"],
            "first_ms": first[0][0] * 1000 if first else float("nan"),
            "dup": percentiles(duplicates)}


def _pooled(runs: list[dict], variant: str) -> dict:
    """Every level's runs of ``variant`` together: equal time at each level."""
    mine = [run for run in runs if run["variant"] == variant]
    return {"orders": sum(r["orders"] for r in mine), "seconds": sum(r["seconds"] for r in mine),
            "latencies": [x for r in mine for x in r["latencies"]],
            "failures": sum(r["failures"] for r in mine),
            "app_cpu": sum(r["app_cpu"] for r in mine),
            "redis": {k: sum(r["redis"].get(k, 0) for r in mine)
                      for k in {k for r in mine for k in r["redis"]}}}


def markdown(results: dict) -> str:
    pairs = _pairs(results["runs"])
    levels = ", ".join(str(c) for c, _, _ in pairs)
    tokens, baseline = _pooled(results["runs"], "tokens"), _pooled(results["runs"], "baseline")
    redis_per_order = {k: v / max(tokens["orders"], 1) for k, v in tokens["redis"].items()}
    token_commands = redis_per_order.get("set", 0) + redis_per_order.get("getdel", 0)
    housekeeping = {k: v for k, v in redis_per_order.items() if k not in ("set", "getdel")}
    baseline_redis = sum(baseline["redis"].values()) / max(baseline["orders"], 1)
    memory, storm = results["memory"], storm_summary(results["storm"])
    ours, theirs = results["claims"]
    p_tok, p_base = percentiles(tokens["latencies"]), percentiles(baseline["latencies"])
    lines = [
        f"Machine: {results['machine']}; Python {results['python']}; gunicorn "
        f"-w {results['workers']} --threads {results['threads']}; PostgreSQL 16 (fsync off) "
        f"and Redis 6.2 on the same machine; load from separate processes on 127.0.0.1; "
        f"{results['seconds']:g} s per variant and level in {results['rounds']} alternating "
        f"runs; load average {results['load'][0]:.1f} at the start, {results['load'][1]:.1f} "
        f"at the end (other work on the machine); {results['when']}.",
        "",
        f"Command: `{results['command'].strip()}`",
        "",
        "| figure | with tokens | baseline (no tokens) | ratio |",
        "|---|---|---|---|",
        f"| orders/s, full cycle (GET form → POST → follow 303), all levels ({levels} users) "
        f"| {_rate(tokens):.1f} | {_rate(baseline):.1f} "
        f"| **{_rate(tokens) / max(_rate(baseline), 1e-9):.3f}** |",
        f"| app CPU per order, gunicorn workers (ms; least sensitive to other load) "
        f"| {_cpu(tokens):.2f} | {_cpu(baseline):.2f} "
        f"| **{_cpu(baseline) / max(_cpu(tokens), 1e-9):.3f}** (baseline / tokens) |",
        f"| cycle latency p50 / p95 / p99 (ms), all levels "
        f"| {_ms(p_tok)} | {_ms(p_base)} "
        f"| p50 {p_tok['p50'] / max(p_base['p50'], 1e-9):.2f}, "
        f"p99 {p_tok['p99'] / max(p_base['p99'], 1e-9):.2f} |",
        f"| Redis commands per successful order (target 2) "
        f"| **{token_commands:.2f}** (SET {redis_per_order.get('set', 0):.2f}, "
        f"GETDEL {redis_per_order.get('getdel', 0):.2f}); connection upkeep "
        f"{sum(housekeeping.values()):.2f} "
        f"({', '.join(f'{k.upper()} {v:.3f}' for k, v in sorted(housekeeping.items()))}) "
        f"| {baseline_redis:.2f} | |",
        f"| Redis bytes per live token, MEMORY USAGE over {memory['tokens']} keys (target ≤ 120) "
        f"| **{memory['memory_usage_avg']:.0f}** (key {memory['key_length']} chars, value "
        f"\"1\", TTL) | | |",
        f"| storm: {storm['posts']} concurrent POSTs of one token "
        f"| {storm['orders']} order; all 303: {storm['all_303']}; all on one order: "
        f"{storm['one_place']}; placed by {storm['fresh']}; first answered in "
        f"{storm['first_ms']:.0f} ms, duplicates p50/p95/p99 {_ms(storm['dup'])} ms "
        f"| | duplicates' p99 / first: {storm['dup']['p99'] / storm['first_ms']:.1f} |",
        f"| claim step, round trips per claim | **{ours['round_trips']:.0f}** (GETDEL) "
        f"| {theirs['round_trips']:.0f} (GET + SET NX + SETEX) "
        f"| {ours['round_trips'] / theirs['round_trips']:.2f} |",
        f"| claim step, claims/s on one connection | {ours['serial_per_s']:.0f} "
        f"| {theirs['serial_per_s']:.0f} "
        f"| **{ours['serial_per_s'] / theirs['serial_per_s']:.2f}** |",
        f"| claim step, claims/s from {ours['threads']} threads | {ours['parallel_per_s']:.0f} "
        f"| {theirs['parallel_per_s']:.0f} "
        f"| **{ours['parallel_per_s'] / theirs['parallel_per_s']:.2f}** |",
        "",
        "| users | tokens orders/s | baseline orders/s | ratio "
        "| app CPU ms/order, tokens / baseline "
        "| tokens p50/p95/p99 ms | baseline p50/p95/p99 ms | failed cycles |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c, tok, base in pairs:
        lines.append(f"| {c} | {_rate(tok):.1f} | {_rate(base):.1f} "
                     f"| {_rate(tok) / max(_rate(base), 1e-9):.3f} "
                     f"| {_cpu(tok):.1f} / {_cpu(base):.1f} "
                     f"| {_ms(percentiles(tok['latencies']))} "
                     f"| {_ms(percentiles(base['latencies']))} "
                     f"| {tok['failures']} / {base['failures']} |")
    lines.append("")
    lines.append("In the claim rows the \"baseline\" column is the lock-and-cache pattern, "
                 "on the same Redis.")
    return "\n".join(lines) + "\n"


def plot(runs: list[dict], path: Path) -> None:
    """orders/s against concurrency, one line per variant."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = _pairs(runs)
    levels = [c for c, _, _ in pairs]
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    ax.plot(levels, [_rate(t) for _, t, _ in pairs], marker="o", label="with tokens")
    ax.plot(levels, [_rate(b) for _, _, b in pairs], marker="s", linestyle="--",
            label="baseline (no tokens)")
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
