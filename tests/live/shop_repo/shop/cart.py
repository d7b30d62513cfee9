"""A shopping cart."""

from __future__ import annotations

from dataclasses import dataclass, field

from shop.discounts import bulk_price, percent_off
from shop.tax import tax_cents


@dataclass
class Line:
    name: str
    unit_cents: int
    quantity: int


@dataclass
class Cart:
    tax_rate: float = 0.0
    discount_percent: int = 0
    lines: list[Line] = field(default_factory=list)

    def add(self, name: str, unit_cents: int, quantity: int = 1) -> None:
        for line in self.lines:
            if line.name == name:
                line.quantity += quantity
                return
        self.lines.append(Line(name, unit_cents, quantity))

    def subtotal(self) -> int:
        return sum(bulk_price(line.unit_cents, line.quantity) for line in self.lines)

    def total(self) -> int:
        discounted = percent_off(self.subtotal(), self.discount_percent)
        return discounted + tax_cents(discounted, self.tax_rate)
