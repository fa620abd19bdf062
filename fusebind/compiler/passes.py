"""The pass registry of `fusebind-opt`, and the built-in passes.

A pass is an xDSL `ModulePass`: a frozen dataclass with a kebab-case `name`
whose fields are its options (`-p 'my-pass{max-ops=16 mode=fast}'`). Register
one with `@register_pass` (or `registry.register(cls)`).

Other rooms add passes without this module naming them: whoever assembles
a driver gives the registry *providers* (`provide(label, passes)`: a callable
returning pass classes), run once on first use. The tools layer
(`fusebind.tools.passes`), which may import every room, provides the
compiler's, lowering's and the runtime's passes to `DEFAULT_REGISTRY`; a
provider that fails is reported as a warning and skipped. User plugins
(`fusebind-opt --plugin some.module`, loaded by the driver) call
`register_pass`.

Text products: a pass whose product is not IR (LLVM IR, a report) calls
`set_text_output(module, text)` instead of writing to stdout; the driver
then prints that text instead of the module. Such a pass must end the
pipeline (a pass after it is an error), and the text is taken off the module
before printing (`take_text_output`), so the IR itself never carries it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError
from fusebind.dialect.errors import FusebindError, FusebindInternalError

#: Discardable attribute on the top-level module: the pipeline's text product.
TEXT_OUTPUT_ATTR = "fusebind.text_output"


def set_text_output(module: ModuleOp, text: str) -> None:
    """Make `text` the product of the pipeline: `fusebind-opt` prints it
    instead of the module. A second call appends (several kernels, one text)."""
    if not isinstance(text, str):
        raise TypeError(f"set_text_output: text must be a str, got {type(text).__name__}")
    earlier = module.attributes.get(TEXT_OUTPUT_ATTR)
    prefix = earlier.data if isinstance(earlier, StringAttr) else ""
    module.attributes[TEXT_OUTPUT_ATTR] = StringAttr(prefix + text)


def take_text_output(module: ModuleOp) -> str | None:
    """Remove and return the text product of the pipeline, if a pass set one."""
    attr = module.attributes.pop(TEXT_OUTPUT_ATTR, None)
    return attr.data if isinstance(attr, StringAttr) else None


class PipelineError(FusebindError):
    """A pipeline text that names an unknown pass or option, or does not parse."""


#: A provider: returns the pass classes of one room (it may import them).
PassProvider = Callable[[], Iterable[type[ModulePass]]]


@dataclass
class PassRegistry:
    """Pass classes by name, plus the providers that add more on first use."""

    passes: dict[str, type[ModulePass]] = field(default_factory=dict)
    #: label (the module the passes come from, for warnings) -> provider
    providers: dict[str, PassProvider] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    _provided: set[str] = field(default_factory=set)

    def register(self, cls: type[ModulePass]) -> type[ModulePass]:
        """Add a pass class; a second class under the same name is refused."""
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"pass class {cls.__qualname__} has no `name`; give it `name = \"my-pass\"`")
        earlier = self.passes.get(name)
        if earlier is not None and earlier is not cls:
            raise ValueError(
                f"pass '{name}' is already registered by {earlier.__module__}.{earlier.__qualname__}; "
                f"cannot register {cls.__module__}.{cls.__qualname__} under the same name"
            )
        self.passes[name] = cls
        return cls

    def provide(self, label: str, passes: PassProvider) -> None:
        """Add a provider, run on first use (`load_providers`); a second
        provider under the same label is ignored (installing twice is harmless)."""
        self.providers.setdefault(label, passes)

    def load_providers(self) -> None:
        """Run each provider not run yet and register what it returns; one that
        raises (a room that fails to import) becomes a warning and is skipped."""
        for label, passes in list(self.providers.items()):
            if label in self._provided:
                continue
            self._provided.add(label)
            try:
                for cls in passes():
                    self.register(cls)
            except ImportError as err:
                self.warnings.append(f"plugin {label} failed to import: {err}")
            except Exception as err:  # a broken room must not take the driver down
                self.warnings.append(f"plugin {label} failed to import: {type(err).__name__}: {err}")

    def available(self) -> list[str]:
        self.load_providers()
        return sorted(self.passes)

    def parse_pipeline(self, text: str) -> list[ModulePass]:
        """`pass-a,pass-b{opt=1 other=x}` → pass instances; raises PipelineError."""
        self.load_providers()
        try:
            specs = list(parse_pipeline(text))
        except ArgSpecParseError as err:
            raise PipelineError(str(err).strip() + _comma_hint(text)) from None
        except Exception as err:
            raise PipelineError(f"cannot parse pipeline '{text}': {err}") from None
        out: list[ModulePass] = []
        for spec in specs:
            cls = self.passes.get(spec.name)
            if cls is None:
                raise PipelineError(
                    f"unknown pass '{spec.name}'; available passes: {', '.join(sorted(self.passes)) or 'none'}"
                )
            try:
                out.append(cls.from_pass_spec(spec))
            except Exception as err:
                raise PipelineError(f"pass '{spec.name}': {err}") from None
        return out


def _comma_hint(text: str) -> str:
    """A hint when options inside `{...}` are separated by commas (`fuse{a=1,b=2}`):
    MLIR separates options by spaces; a comma there separates list values."""
    fixed = re.sub(r"\{[^{}]*\}", lambda m: re.sub(r",\s*(?=[\w-]+=)", " ", m.group()), text)
    if fixed == text:
        return ""
    return f"\npass options are separated by spaces, as in MLIR: write '{fixed}'"


DEFAULT_REGISTRY = PassRegistry()


def register_pass(cls: type[ModulePass]) -> type[ModulePass]:
    """Register a pass with the driver's default registry (usable as a decorator)."""
    return DEFAULT_REGISTRY.register(cls)


@register_pass
@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Verify the module (the driver also verifies after every pipeline)."""

    name = "verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        op.verify()


@register_pass
@dataclass(frozen=True)
class StripFusedPass(ModulePass):
    """Inline every `fused.region` into its parent block (arm 0 as IR).

    With `only-unassigned=true`, only regions with `fused_id = 0` are inlined.
    """

    name = "strip-fused"
    only_unassigned: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from fusebind.compiler.inline import inline_region
        from fusebind.dialect.fused import RegionOp

        regions = [r for r in op.walk() if isinstance(r, RegionOp)]
        for region in reversed(regions):  # inner regions first
            if self.only_unassigned and region.id != 0:
                continue
            result = inline_region(region)
            if not result.inlined:  # verified IR has only well-formed regions: a bug if reached
                raise FusebindInternalError(f"strip-fused: {result.diagnostic}")
