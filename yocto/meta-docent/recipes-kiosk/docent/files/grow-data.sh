#!/bin/sh
# Grows the data partition (PARTLABEL=data, the last one, mounted at /data) to the end of its
# disk, and its ext4 file system with it, while mounted. Run at every boot by
# docent-grow-data.service; does nothing once the partition reaches the end. An image is made
# for the smallest card (data 256 MiB, the GPT's backup header right after it); written to a
# 32 GB card, the rest of the card would otherwise lie unused, and the kernel warns at every
# boot that the backup header is not at the end of the disk.
#   1. the backup GPT header and table move to the end of the disk (sfdisk --relocate),
#   2. the partition ends where the usable space ends (sfdisk -N; partx tells the kernel),
#   3. resize2fs grows the mounted file system (online resize).
# A cut in between leaves a state the next boot completes: each step is done again only when
# it is still needed.
set -eu
DATA=${DOCENT_DATA_DEVICE:-/dev/disk/by-partlabel/data}
part=$(readlink -f "$DATA")
name=${part##*/}
sys=/sys/class/block/$name
[ -e "$sys/partition" ] || { echo "docent-grow-data: $DATA is not a partition" >&2; exit 1; }
disk=/dev/$(basename "$(readlink -f "$sys/..")")
num=$(cat "$sys/partition")
disk_sectors=$(cat "/sys/class/block/${disk##*/}/size")
end=$(( $(cat "$sys/start") + $(cat "$sys/size") ))
# GPT keeps its backup table (32 sectors) and header (1) in the disk's last 33 sectors; less
# than 4 MiB (the layout's alignment) to gain is not worth a change.
room=$(( disk_sectors - 33 - end ))
if [ "$room" -ge 8192 ]; then
    echo "docent-grow-data: $name ends $((room / 2048)) MiB before the end of $disk: growing it"
    sfdisk --quiet --no-reread --no-tell-kernel --relocate gpt-bak-std "$disk"
    # --force: the disk is in use (the root is on it), so its table cannot be read again as a
    # whole; partx tells the kernel the one partition's new end (BLKPG).
    echo ", +" | sfdisk --quiet --force --no-reread --no-tell-kernel -N "$num" "$disk"
    partx --update --nr "$num" "$disk"
fi
# The file system fills its partition (also after a cut between the two steps above).
fs_blocks=$(dumpe2fs -h "$part" 2>/dev/null | sed -n 's/^Block count: *//p')
block=$(dumpe2fs -h "$part" 2>/dev/null | sed -n 's/^Block size: *//p')
part_bytes=$(( $(cat "$sys/size") * 512 ))
if [ -n "$fs_blocks" ] && [ $(( part_bytes - fs_blocks * block )) -ge $((4 * 1024 * 1024)) ]; then
    resize2fs "$part"
    echo "docent-grow-data: /data is $((part_bytes / 1024 / 1024)) MiB"
fi
