"""calculate: exact arithmetic (fractions, not floats), percentages and unit conversions,
parsed from the expression's syntax tree (never `eval`)."""

from __future__ import annotations

import ast
import math
import operator
import re
from fractions import Fraction

from ..spec import Tool, ToolError, ToolSpec

MAX_POWER = 1000  # 2**1000 is exact and quick; bigger exponents would hang the turn
MAX_BITS = 100_000  # nor may a power of a power grow past what can be said
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_WORDS = [(r"\bmultiplied by\b|\btimes\b|×|(?<=[\d)])\s*x\s*(?=[\d(])", "*"),
          (r"\bdivided by\b|÷|\bover\b", "/"), (r"\bplus\b", "+"), (r"\bminus\b", "-"),
          (r"\bsquared\b", "**2"), (r"\bcubed\b", "**3"), (r"\^", "**"),
          (r"(?<=\d),(?=\d{3}\b)", "")]
# unit → (kind, factor to the kind's base unit); temperatures are handled apart
_UNITS = {
    "length": {"mm": 0.001, "millimeter": 0.001, "cm": 0.01, "centimeter": 0.01, "m": 1,
               "meter": 1, "metre": 1, "km": 1000, "kilometer": 1000, "kilometre": 1000,
               "in": 0.0254, "inch": 0.0254, "ft": 0.3048, "foot": 0.3048, "feet": 0.3048,
               "yd": 0.9144, "yard": 0.9144, "mi": 1609.344, "mile": 1609.344},
    "mass": {"g": 1, "gram": 1, "kg": 1000, "kilogram": 1000, "mg": 0.001, "milligram": 0.001,
             "lb": 453.59237, "pound": 453.59237, "oz": 28.349523125, "ounce": 28.349523125},
    "volume": {"ml": 0.001, "milliliter": 0.001, "l": 1, "liter": 1, "litre": 1,
               "cup": 0.2365882365, "gallon": 3.785411784, "pint": 0.473176473,
               "floz": 0.0295735295625},
    "time": {"s": 1, "second": 1, "sec": 1, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
             "day": 86400, "week": 604800},
}
_TEMPS = {"c": "c", "celsius": "c", "f": "f", "fahrenheit": "f", "k": "k", "kelvin": "k"}
_CONVERT = re.compile(r"^(?P<amount>.+?)\s*(?P<src>[a-z. ]+?)\s+(?:in|to|into|as)\s+"
                      r"(?P<dst>[a-z. ]+)$")


def _unit(word: str) -> tuple[str, Fraction | str] | None:
    w = word.strip().removeprefix("degrees ").removeprefix("degree ").replace(".", "")
    for candidate in (w, w.removesuffix("s"), w.removesuffix("es")):
        if candidate in _TEMPS:
            return "temperature", _TEMPS[candidate]
        for kind, table in _UNITS.items():
            if candidate in table:
                return kind, Fraction(str(table[candidate]))
    return None


def _to_kelvin(value: Fraction, scale: str) -> Fraction:
    if scale == "c":
        return value + Fraction("273.15")
    if scale == "f":
        return (value - 32) * Fraction(5, 9) + Fraction("273.15")
    return value


def _from_kelvin(value: Fraction, scale: str) -> Fraction:
    if scale == "c":
        return value - Fraction("273.15")
    if scale == "f":
        return (value - Fraction("273.15")) * Fraction(9, 5) + 32
    return value


def _value(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _value(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _value(node.left), _value(node.right)
        if right == 0 and isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod):
            raise ToolError("division by zero has no answer")
        return Fraction(_BIN[type(node.op)](left, right))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        base, power = _value(node.left), _value(node.right)
        if power.denominator != 1 or abs(power) > MAX_POWER:
            if base < 0 or abs(power) > MAX_POWER:
                raise ToolError(f"the power {power} is too large or not a whole number")
            return Fraction(float(base) ** float(power))
        size = max(base.numerator.bit_length(), base.denominator.bit_length()) * abs(power)
        if size > MAX_BITS:
            raise ToolError("the result would be too large to say")
        return base ** int(power)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "sqrt" and len(node.args) == 1:
        v = _value(node.args[0])
        if v < 0:
            raise ToolError("a negative number has no real square root")
        root = math.isqrt(v.numerator), math.isqrt(v.denominator)
        if root[0] ** 2 == v.numerator and root[1] ** 2 == v.denominator:
            return Fraction(*root)
        return Fraction(math.sqrt(v))
    raise ToolError("only numbers, + - * / ** %, parentheses, sqrt(), percentages and unit "
                    "conversions are understood")


def evaluate(expression: str) -> Fraction:
    """The exact value of an arithmetic expression (words such as 'times' and '15% of 80'
    understood)."""
    text = expression.strip().lower().rstrip("?.= ")
    text = re.sub(r"^(what is|what's|calculate|compute)\s+", "", text)
    for pattern, repl in _WORDS:
        text = re.sub(pattern, repl, text)
    text = re.sub(r"(\d+(?:\.\d+)?)\s*(?:%|percent)\s*of\b", r"(\1/100)*", text)
    text = re.sub(r"(\d+(?:\.\d+)?)\s*(?:%|percent)", r"(\1/100)", text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolError(f"'{expression}' is not an arithmetic expression") from None
    return _value(tree.body)


def convert(amount: Fraction, src: str, dst: str) -> Fraction:
    a, b = _unit(src), _unit(dst)
    if a is None or b is None:
        unknown = src if a is None else dst
        raise ToolError(f"unknown unit '{unknown.strip()}'")
    if a[0] != b[0]:
        raise ToolError(f"cannot convert {a[0]} ({src.strip()}) to {b[0]} ({dst.strip()})")
    if a[0] == "temperature":
        return _from_kelvin(_to_kelvin(amount, str(a[1])), str(b[1]))
    return amount * Fraction(a[1]) / Fraction(b[1])


def number_text(value: Fraction) -> str:
    """An exact integer as is; otherwise a decimal of at most 10 significant digits."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.10g}"


def calculate(expression: str) -> str:
    text = expression.strip().lower().rstrip("?. ")
    match = _CONVERT.match(text)
    if match and _unit(match["dst"]) is not None and _unit(match["src"]) is not None:
        value = convert(evaluate(match["amount"]), match["src"], match["dst"])
        return f"{number_text(value)} {match['dst'].strip()}"
    return number_text(evaluate(expression))


def calculator_tool() -> Tool:
    return Tool(
        ToolSpec(
            "calculate",
            "Exact arithmetic, percentages and unit conversions. Use it for any calculation, "
            "e.g. '17 * 23', '15% of 80', '5 km in miles', '70 f in c'.",
            {"type": "object", "properties": {"expression": {
                "type": "string", "description": "the calculation, e.g. '17 * 23'"}},
             "required": ["expression"]},
        ),
        lambda args, stop: calculate(str(args["expression"])),
    )
