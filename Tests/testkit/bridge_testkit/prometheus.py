"""Reading a daemon's /metrics: the lines, and the counter identity of docs/contract.md §7.6."""

from __future__ import annotations

import urllib.request


def scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode().splitlines()


def books_balance(port: int, direction: str = "pusher_to_mqtt") -> tuple[float, float, float]:
    """(received_total, the sum of messages_total outcomes, buffered_messages) of one direction:
    the first equals the sum of the others at a quiet moment (docs/contract.md §7.6)."""
    lines = scrape(port)

    def total(family: str) -> float:
        return sum(float(line.split()[-1]) for line in lines
                   if line.startswith(family + "{") and f'direction="{direction}"' in line)

    return (total("pusher_mqtt_bridge_received_total"), total("pusher_mqtt_bridge_messages_total"),
            total("pusher_mqtt_bridge_buffered_messages"))
