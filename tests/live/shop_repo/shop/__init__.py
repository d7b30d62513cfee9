"""A small pricing library."""

from shop.cart import Cart
from shop.discounts import bulk_price, percent_off
from shop.money import format_cents, to_cents
from shop.tax import tax_cents

__all__ = ["Cart", "bulk_price", "format_cents", "percent_off", "tax_cents", "to_cents"]
