"""Provides `TreeScreen`: a playthrough's message variants as a tree, to jump, roll back or branch."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import getters, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from tavern_tui.tui.labels import plural
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import MessageView, PlaythroughView, TimelineView, VariantView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

Ref = tuple[int, int]

_ALTERNATIVES = Binding.Group("Alternatives")

_TOGGLE = Style(bold=True) + Style.from_meta({"toggle": True})
"""The expand icon's style: the `toggle` meta makes a click on it expand, as in `Tree`."""


def placements(variants: Sequence[VariantView]) -> dict[Ref, Ref | None]:
    """Where each variant's node goes: the ref of the node it is added under (None: the top).

    A chat is a chain as deep as it is long, so the tree does not nest each message under the
    one before. Where the conversation forks (two or more variants of one message each go on),
    each of them gets a node of its own, placed where its parent's chain is, and its
    continuation is listed inside it; every other message follows its parent in the same list,
    and a swipe nothing follows (the usual alternative reply) is listed beside its siblings
    (`VariantTree.show`). The nesting depth is therefore the number of forks on the way, never
    the length of the chat nor its swipes (a trial: an imported chat with 252 swiped replies
    was nested 252 deep, every row only guides).

    Args:
        variants: depth-first, as `tavern.timeline.timeline` gives them (a parent before its children).
    """
    going_on: dict[Ref | None, int] = {}  # a parent → how many of its variants continue
    for variant in variants:
        if variant.children:
            going_on[variant.parent] = going_on.get(variant.parent, 0) + 1
    placed: dict[Ref, Ref | None] = {}
    inner: dict[Ref, Ref | None] = {}  # where a variant's continuation goes
    for variant in variants:
        container = None if variant.parent is None else inner.get(variant.parent)
        placed[variant.ref] = container
        forks = variant.position[1] > 1 and going_on.get(variant.parent, 0) > 1
        inner[variant.ref] = variant.ref if forks else container
    return placed


CONTINUED = "continues below"
"""The mark of the one alternative of a message that goes on, where the tree does not nest it
(`placements`): the messages after its siblings continue it."""

MIN_PREVIEW = 8
"""Cells of a preview always shown, however narrow the tree (the marks come after it)."""


def variant_marks(variant: VariantView) -> list[str]:
    """The marks after a node's preview: "summary of messages 2–15", "edited", "summarised",
    "deleted", "cut off", "→ #5"."""
    marks = []
    if variant.summary_of is not None:
        marks.append(f"summary of messages {variant.summary_of[0]}–{variant.summary_of[1]}")
    if variant.edited:
        marks.append("edited")
    if variant.summarised:
        marks.append("summarised")
    if variant.deleted:
        marks.append("deleted")
    if variant.partial:
        marks.append("cut off")
    if variant.branches:
        marks.append("→ " + ", ".join(f"#{b}" for b in variant.branches))
    return marks


class VariantTree(Tree[VariantView]):
    """The variants of a playthrough; each node shows ● (on the active path), the speaker,
    `n/m` among its siblings, a preview and marks. The preview is cut to the tree's width so
    the marks (deleted, cut off, ...) always show. Each node's data is its `VariantView`.

    Keys: ↑/↓ move, ←/→ move to the previous/next alternative (of the node, or of the branch
    it is in), space expands or collapses, Enter posts `Tree.NodeSelected`.

    | class | meaning |
    | --- | --- |
    | `variant-tree--active` | the ● marker and speaker of a message on the active path |
    | `variant-tree--person` | the person's name |
    | `variant-tree--character` | the character's (or System) name |
    | `variant-tree--off-path` | the preview of a message off the active path |
    | `variant-tree--mark` | the marks (edited, deleted, cut off, branches) |

    Its `DEFAULT_CSS` colours them with the app's variables (`$speaker-user`,
    `$speaker-character`, `$mark-origin`, `theming.APP_VARIABLES`): the app must declare them.
    """

    # Own bindings only: Tree/ScrollView bind ←/→ to scrolling, which a key listed later
    # could not override (bindings of one key run in class order).
    _inherit_bindings: ClassVar[bool] = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Jump here", id="tree.jump"),
        Binding("left", "alternative(-1)", "Previous", id="tree.previous", group=_ALTERNATIVES),
        Binding("right", "alternative(1)", "Next", id="tree.next", group=_ALTERNATIVES),
        Binding("space", "toggle_node", "Expand", id="tree.toggle", show=False),
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("shift+left", "cursor_parent", "Cursor to parent", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "scroll_home", "First", show=False),
        Binding("end", "scroll_end", "Last", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = Tree.COMPONENT_CLASSES | {
        "variant-tree--active", "variant-tree--person", "variant-tree--character",
        "variant-tree--off-path", "variant-tree--mark",
    }

    DEFAULT_CSS = """
    VariantTree {
        & > .variant-tree--active { text-style: bold; }
        & > .variant-tree--person { color: $speaker-user; }
        & > .variant-tree--character { color: $speaker-character; }
        & > .variant-tree--off-path { color: $mark-origin; text-style: none; }
        & > .variant-tree--mark { color: $mark-origin; text-style: italic; }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self.show_root = False
        self.auto_expand = False  # Enter jumps; space expands
        self.guide_depth = 3
        self.nodes: dict[Ref, TreeNode[VariantView]] = {}
        """Each variant's node."""
        self._siblings: Mapping[Ref, Sequence[Ref]] = {}
        self._names: dict[str, str] = {}

    def show(self, timeline: TimelineView, names: dict[str, str]) -> None:
        """Replace the tree with `timeline`'s variants; expand the active path.

        Args:
            names: speaker by role ("user" → the person's name, "assistant" → the character's).
        """
        self.clear()
        self.nodes = {}
        self._siblings = timeline.siblings
        self._names = names
        placed = placements(timeline.variants)
        containers = set(placed.values())
        for variant in timeline.variants:
            container = placed[variant.ref]
            under = self.root if container is None else self.nodes[container]
            # A later sibling goes right after the one before it, not after that one's continuation.
            siblings = timeline.siblings.get(variant.ref, ())
            at = siblings.index(variant.ref) if variant.ref in siblings else 0
            after = self.nodes.get(siblings[at - 1]) if at > 0 else None
            if variant.ref in containers:
                node = under.add(Text(variant.preview), variant, expand=variant.active,  # a str label is markup
                                 after=after)
            else:
                node = under.add_leaf(Text(variant.preview), variant, after=after)
            self.nodes[variant.ref] = node

    def speaker(self, variant: VariantView) -> str:
        """The name shown for `variant`'s speaker (the person's, the character's, Summary or System)."""
        if variant.summary_of is not None:
            return "Summary"
        return variant.speaker or self._names.get(variant.role, "System")

    def render_label(self, node: TreeNode[VariantView], base_style: Style, style: Style) -> Text:
        variant = node.data
        if variant is None:
            return super().render_label(node, base_style, style)
        component = self.get_component_rich_style
        speaker = component("variant-tree--person" if variant.role == "user" else "variant-tree--character",
                            partial=True)
        label = Text()
        if variant.active:
            active = component("variant-tree--active", partial=True)
            label.append("● ", active)
            label.append(self.speaker(variant), speaker + active)
        else:
            label.append("  ")
            label.append(self.speaker(variant), speaker)
        if variant.position[1] > 1:
            label.append(f" {variant.position[0]}/{variant.position[1]}")
        label.append("  ")
        preview = Text(variant.preview or "(empty)",
                       style="" if variant.active else component("variant-tree--off-path", partial=True))
        marks = variant_marks(variant)
        if variant.position[1] > 1 and variant.children and not node.allow_expand:
            marks.append(CONTINUED)  # the one alternative that goes on: its continuation follows the swipes
        shown_marks = Text("  · " + " · ".join(marks), style=component("variant-tree--mark", partial=True)) \
            if marks else Text()
        room = self._label_room(node) - cell_len(self.ICON_NODE) - label.cell_len - shown_marks.cell_len
        if room < preview.cell_len:
            # Cut the preview, never the marks: "deleted" or "cut off" must show at any width.
            preview.truncate(max(room, MIN_PREVIEW), overflow="ellipsis")
        label.append_text(preview)
        label.append_text(shown_marks)
        label.stylize(style)
        if node.allow_expand:
            icon = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            return Text.assemble((icon, base_style + _TOGGLE), label)
        # as wide as the icon, so a leaf's speaker lines up with an expandable sibling's
        return Text.assemble(" " * len(self.ICON_NODE), label)

    def _label_room(self, node: TreeNode[VariantView]) -> int:
        """Cells a node's label (icon included) may take without running past the tree's right
        edge: the width inside the padding, less a vertical scrollbar's (always kept, so a
        scrollbar coming or going never leaves lines cut to the other width) and the node's guides.
        Unbounded before the tree has a size."""
        width = self.content_size.width
        if width <= 0:
            return sys.maxsize
        depth = 0
        parent = node.parent
        while parent is not None and parent is not self.root:
            depth += 1
            parent = parent.parent
        return width - int(self.styles.scrollbar_size_vertical) - depth * self.guide_depth

    def action_alternative(self, step: int) -> None:
        """Move the cursor to the previous (-1) / next (+1) alternative: of the node when it
        has siblings, else of the branch it sits in (the nearest message before it that has
        alternatives, whether or not the tree nests there). Nothing else changes."""
        node = self.cursor_node
        variant = node.data if node is not None else None
        while variant is not None and variant.position[1] <= 1:
            above = self.nodes.get(variant.parent) if variant.parent is not None else None
            variant = above.data if above is not None else None
        if variant is None:
            return
        siblings = self._siblings.get(variant.ref, [variant.ref])
        index = siblings.index(variant.ref) + step
        if 0 <= index < len(siblings) and siblings[index] in self.nodes:
            self.move_cursor(self.nodes[siblings[index]], animate=False)


class TreeScreen(TavernScreen[int | None]):
    """The branch tree of one playthrough (F5 in the chat), the shown message under the cursor.

    Keys: Enter jumps to the message under the cursor (the chat then shows it and its newest
    continuation), `r` rolls back to it (continue from there; what followed stays a branch),
    `b` starts a new playthrough from it, `e` edits it, `d` deletes it (hides it from the chat,
    after a confirm: `y` deletes, Esc or `n` keeps it), ←/→ move among alternatives, Esc goes back.

    Dismisses with the playthrough the chat should show: this one after a jump or rollback,
    the new one after `b`, None after Esc. Every service call runs in a thread worker
    (`TavernScreen.call`); `loaded` turns True when the latest read is shown with its cursor placed.
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="tree.back"),
        Binding("r", "rollback", "Roll back here", id="tree.rollback"),
        Binding("b", "branch", "New playthrough", id="tree.branch", tooltip="A new playthrough from here"),
        Binding("e", "edit", "Edit", id="tree.edit"),
        Binding("d", "delete", "Delete", id="tree.delete"),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}

    FOOTER_DROP = ("quit", "delete", "alternative(-1)", "alternative(1)", "edit")
    """The keys the footer hides first on a narrow terminal (every key stays in the command palette)."""

    tree = getters.query_one("#variants", VariantTree)

    def __init__(self, tavern: Tavern, playthrough_id: int) -> None:
        super().__init__(tavern, playthrough_id)
        self.playthrough_id: int = playthrough_id
        self.loaded = False
        """The latest read is shown and its cursor placed (tests wait on it)."""

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="tree-title", markup=False)
        yield VariantTree(id="variants")
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        self._load()

    def _load(self, cursor: Ref | None = None) -> None:
        """(Re)read the playthrough and its timeline in a worker, then rebuild the tree; the cursor
        goes to `cursor`, else the last message; `loaded` is False until then."""
        self.loaded = False
        def read() -> tuple[PlaythroughView, TimelineView, str]:
            view = self.tavern.playthroughs.playthrough(self.playthrough_id)
            group = self.tavern.groups.group_of(self.playthrough_id)  # a group chat's title names the group
            name = group.name if group else view.character_name
            return view, self.tavern.timeline.timeline(self.playthrough_id), name

        self.call(read, title="Cannot show the branches", then=lambda loaded: self._show(*loaded, cursor),
                  failed=lambda _: self.dismiss(None))

    def _show(self, view: PlaythroughView, timeline: TimelineView, name: str, cursor: Ref | None) -> None:
        forks = sum(1 for v in timeline.variants if v.position[1] > 1 and v.position[0] == 1)
        # The path the chat shows, then every other message variant of the tree (swipes,
        # branches): "3 variants" for a plain chat of three messages read as three alternatives.
        messages = [v for v in timeline.variants if v.summary_of is None]
        shown = sum(1 for v in messages if v.active)
        self.query_one("#tree-title", Static).update(
            f"Branches · {name} #{view.id} · {plural(shown, 'message')} shown"
            f" · {plural(len(messages) - shown, 'other variant')} · {plural(forks, 'branch point')}")
        self.tree.show(timeline, {"user": view.user_name, "assistant": view.character_name})
        self.tree.focus()
        target = cursor if cursor in self.tree.nodes else (timeline.path[-1] if timeline.path else None)
        # After the first layout: the cursor needs the tree's lines, the scroll its size. `loaded`
        # turns True only then, so a key read after it finds the cursor where it stays.
        self.call_after_refresh(self._placed, None if target is None else self.tree.nodes[target])

    def _placed(self, node: TreeNode[VariantView] | None) -> None:
        if node is not None:
            self.tree.move_cursor(node)
        self.loaded = True

    @property
    def current(self) -> VariantView | None:
        """The variant under the cursor."""
        node = self.tree.cursor_node
        return None if node is None else node.data

    @staticmethod
    def _message_ref(variant: VariantView) -> Ref:
        """Where a jump, rollback or branch goes: the variant, or for a summary node the last
        message it covers (the summary itself is not a message of the tree)."""
        return variant.parent if variant.summary_of is not None and variant.parent is not None else variant.ref

    def _refuse_summarised(self, variant: VariantView, what: str) -> bool:
        """Say so and return True when `variant` is folded into a summary (the chat shows the
        summary, not it): the summary node is what can be changed."""
        if not variant.summarised:
            return False
        self.notify(f"This message is summarised: the chat shows the summary instead. {what} the summary node "
                    "(listed after the last message it covers).", title=f"Cannot {what.lower()}",
                    severity="warning", markup=False)
        return True

    @on(Tree.NodeSelected, "#variants")
    def _jump(self, event: Tree.NodeSelected[VariantView]) -> None:
        event.stop()
        variant = event.node.data
        if variant is None:
            return
        self.call(self.tavern.timeline.select_variant, self.playthrough_id, self._message_ref(variant),
                  title="Cannot jump there",
                  then=lambda _: self.dismiss(self.playthrough_id))

    def action_rollback(self) -> None:
        """Continue from the message under the cursor; later messages stay a sibling branch."""
        variant = self.current
        if variant is None:
            return
        self.call(self.tavern.timeline.rollback, self.playthrough_id, self._message_ref(variant),
                  title="Cannot roll back",
                  then=lambda _: self.dismiss(self.playthrough_id))

    def action_branch(self) -> None:
        """Start a new playthrough from the message under the cursor and open it."""
        variant = self.current
        if variant is None:
            return
        self.call(self.tavern.timeline.branch_playthrough, self.playthrough_id, self._message_ref(variant),
                  title="Cannot branch",
                  then=self._branched)

    def _branched(self, created: PlaythroughView) -> None:
        self.notify(f"Playthrough #{created.id} starts here (#{self.playthrough_id} is unchanged).",
                    title="New playthrough")
        self.dismiss(created.id)

    def action_edit(self) -> None:
        """Rewrite the message under the cursor (on the path the chat shows)."""
        variant = self.current
        if variant is None:
            return
        if not variant.active or variant.deleted:
            self.notify("Only messages the chat shows can be edited: jump there first (Enter).",
                        title="Cannot edit", severity="warning")
            return
        if self._refuse_summarised(variant, "Edit"):
            return

        def read() -> MessageView | None:
            ref = self.tavern.timeline.shown_ref(self.playthrough_id, variant.ref)
            return next((m for m in self.tavern.playthroughs.messages(self.playthrough_id) if m.ref == ref), None)

        def edit(shown: MessageView | None) -> None:
            speaker = shown.speaker if shown is not None else variant.role
            text = shown.content if shown is not None else variant.preview
            self.app.push_screen(EditMessageScreen(speaker, text), save)

        def save(edited: str | None) -> None:
            if edited is not None:
                self.call(self.tavern.timeline.edit_message, self.playthrough_id, variant.ref, edited,
                          title="Cannot edit", then=lambda _: self._load(variant.ref))

        self.call(read, title="Cannot edit", then=edit)

    def action_delete(self) -> None:
        """Ask, then hide the message under the cursor from the chat (it stays here, marked
        deleted). `y` confirms; Esc or `n` cancels and nothing changes."""
        variant = self.current
        if variant is None:
            return
        if not variant.active or variant.deleted:
            self.notify("Only messages the chat shows can be deleted: jump there first (Enter).",
                        title="Cannot delete", severity="warning")
            return
        if self._refuse_summarised(variant, "Delete"):
            return
        question = (f"Delete this message from the chat?\n\n{self.tree.speaker(variant)}: "
                    f"“{variant.preview or '(empty)'}”\n\n"
                    "It is hidden from the chat; the original stays in this tree, marked deleted.")

        def answered(yes: bool | None) -> None:
            if yes:
                self._delete(variant)

        self.app.push_screen(ConfirmScreen(question, confirm="Delete"), answered)

    def _delete(self, variant: VariantView) -> None:
        self.call(self.tavern.timeline.delete_message, self.playthrough_id, variant.ref, title="Cannot delete",
                  then=lambda _: self._deleted(variant))

    def _deleted(self, variant: VariantView) -> None:
        self.notify("Hidden from the chat; the original stays here.", title="Deleted")
        self._load(variant.ref)

    def action_back(self) -> None:
        """Return to the chat unchanged."""
        self.dismiss(None)
