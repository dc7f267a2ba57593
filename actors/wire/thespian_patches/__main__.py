"""``python -m actors.wire.thespian_patches``: each patch, whether it applies here, and its targets' fingerprints.

For whoever moves Pegasus to another Thespian: read the diff of every target listed, adapt the
patch, then copy the fingerprints printed here into its module (docs/thespian-patches.md#moving-to-another-thespian).
"""

from __future__ import annotations

from actors.wire.thespian_patches import PATCHES, check
from actors.wire.thespian_patches.base import PINNED

checked = check()
print(f"thespian {checked.version} installed; patches written for {PINNED}")
for patch in PATCHES:
    print(f"\n{patch.name} ({patch.kind.value}): {checked.problems.get(patch.name, 'applies')}")
    for target in patch.targets:
        found = target.found()
        print(f"  {target.label:<50} {found}{'' if found == target.expected else '   (expected ' + target.expected + ')'}")
