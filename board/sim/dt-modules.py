#!/usr/bin/env python3
"""dt-modules.py DTB MODULES_DIR KVER NODE...: the kernel modules a board needs before its root.

A board's initramfs must load every driver between the kernel and the root file system's disk:
the disk's controller, and everything that controller waits for (its voltage regulators, the
GPIO lines those switch, its clocks, resets, power domains), and the buses above each of them.
Which ones these are is written in the board's device tree, so this walks it instead of trusting
a hand-kept list (on the Raspberry Pi 4 the SD controller waits for two regulators that a list
of "sdhci-iproc ext4" forgot, and the card never appeared).

From each NODE (a path, or an alias of /aliases), it follows the node's parents and every
phandle in its *-supply, gpio(s)/*-gpio(s), clocks, resets, power-domains, mboxes and
mmc-pwrseq properties, recursively. Each compatible string found is looked up as the kernel
would (modprobe --resolve-alias on `of:N<name>T(null)C<compatible>`) against MODULES_DIR (a
tree with lib/modules/KVER); a compatible no module answers to is built in (or needs no driver).
A device tree node that the kernel hands to a multi-function driver's children is named in
MFD_CHILDREN below. Prints the modules, one per line, in the order found (deepest supplier
first), each once; nothing else. Exits 1 with a message when the device tree has no such node.
"""
import struct
import subprocess
import sys

FDT_BEGIN_NODE, FDT_END_NODE, FDT_PROP, FDT_NOP, FDT_END = 1, 2, 3, 4, 9

# Properties whose value is a list of <phandle args...>, with the cells property of the target
# that says how many args follow each phandle (None: a single phandle, no args).
PHANDLE_LISTS = {
    "clocks": "#clock-cells",
    "resets": "#reset-cells",
    "power-domains": "#power-domain-cells",
    "mboxes": "#mbox-cells",
    "mmc-pwrseq": None,
}
# A multi-function device whose node's compatible names the parent driver; the function a board
# needs (here: the watchdog that resets the board) is a platform device the parent creates.
MFD_CHILDREN = {
    "brcm,bcm2835-pm-wdt": ["platform:bcm2835-wdt"],
    "brcm,bcm2711-pm": ["platform:bcm2835-wdt"],
}


class Node:
    def __init__(self, name, parent):
        self.name, self.parent, self.props, self.children = name, parent, {}, []

    def path(self):
        if self.parent is None:
            return "/"
        up = self.parent.path()
        return (up if up != "/" else "") + "/" + self.name

    def u32s(self, prop):
        v = self.props.get(prop, b"")
        return list(struct.unpack(">%dI" % (len(v) // 4), v[: len(v) // 4 * 4]))

    def strings(self, prop):
        v = self.props.get(prop)
        return [s.decode() for s in v.split(b"\0") if s] if v else []

    def enabled(self):
        return self.strings("status") in ([], ["okay"], ["ok"])


def parse(blob):
    magic, _, off_struct, off_strings = struct.unpack(">IIII", blob[:16])
    if magic != 0xD00DFEED:
        sys.exit("dt-modules: not a flattened device tree")
    pos, root, cur = off_struct, None, None
    while True:
        (token,) = struct.unpack(">I", blob[pos : pos + 4])
        pos += 4
        if token == FDT_BEGIN_NODE:
            end = blob.index(b"\0", pos)
            node = Node(blob[pos:end].decode(), cur)
            if cur is None:
                root = node
            else:
                cur.children.append(node)
            cur, pos = node, (end + 4) & ~3
        elif token == FDT_END_NODE:
            cur = cur.parent
        elif token == FDT_PROP:
            length, nameoff = struct.unpack(">II", blob[pos : pos + 8])
            name = blob[off_strings + nameoff : blob.index(b"\0", off_strings + nameoff)].decode()
            cur.props[name] = blob[pos + 8 : pos + 8 + length]
            pos = (pos + 8 + length + 3) & ~3
        elif token == FDT_NOP:
            continue
        elif token == FDT_END:
            return root
        else:
            sys.exit("dt-modules: bad token %d" % token)


def walk(node):
    yield node
    for c in node.children:
        yield from walk(c)


def suppliers(node, by_phandle):
    """The nodes this node's properties point at."""
    for prop in node.props:
        cells = None
        if prop.endswith("-supply") or prop == "mmc-pwrseq":
            targets = node.u32s(prop)[:1]
            yield from (by_phandle[p] for p in targets if p in by_phandle)
            continue
        if prop in ("gpio", "gpios") or prop.endswith("-gpio") or prop.endswith("-gpios"):
            cells = "#gpio-cells"
        elif prop in PHANDLE_LISTS:
            cells = PHANDLE_LISTS[prop]
        else:
            continue
        values, i = node.u32s(prop), 0
        while i < len(values):
            target = by_phandle.get(values[i])
            if target is None:
                break
            yield target
            i += 1 + (target.u32s(cells)[0] if cells and cells in target.props else 0)


def resolve(alias, modules_dir, kver):
    out = subprocess.run(
        ["modprobe", "-d", modules_dir, "-S", kver, "--resolve-alias", alias],
        capture_output=True, text=True,
    )
    return out.stdout.split() if out.returncode == 0 else []


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__.split("\n")[0])
    dtb, modules_dir, kver, starts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    root = parse(open(dtb, "rb").read())
    nodes = list(walk(root))
    by_path = {n.path(): n for n in nodes}
    by_phandle = {n.u32s("phandle")[0]: n for n in nodes if "phandle" in n.props}
    aliases = next((c for c in root.children if c.name == "aliases"), None)
    seen, order = set(), []

    def visit(node):
        if id(node) in seen:
            return
        seen.add(id(node))
        for s in suppliers(node, by_phandle):
            visit(s)
        if node.parent is not None:
            visit(node.parent)
        order.append(node)

    for start in starts:
        path = start
        if not start.startswith("/") and aliases is not None and start in aliases.props:
            path = aliases.strings(start)[0]
        if path not in by_path:
            sys.exit("dt-modules: no node %s in %s" % (start, dtb))
        visit(by_path[path])
    modules = []
    for node in order:
        if not node.enabled():
            continue
        name = node.name.split("@")[0]
        for compatible in node.strings("compatible"):
            found = resolve("of:N%sT(null)C%s" % (name, compatible), modules_dir, kver)
            for child in MFD_CHILDREN.get(compatible, []):
                found += resolve(child, modules_dir, kver)
            for m in found:
                if m not in modules:
                    modules.append(m)
    print("\n".join(modules))


if __name__ == "__main__":
    main()
