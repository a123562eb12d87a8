#!/usr/bin/env bash
# doc_links.sh FILE.md...: every relative link of the given Markdown files
# resolves: the file or directory exists (relative to the linking file), and a
# `#anchor` names a heading of the Markdown file it points into (GitHub's
# slugs: lower case, punctuation dropped, spaces to hyphens, "-1", "-2" for
# repeats). Links in code blocks and code spans are not links; http(s):,
# mailto: and other URLs with a scheme are not checked. Prints each broken link
# as FILE:LINE: TARGET: WHY and exits 1 when there is one.
# Limitation: a heading with non-ASCII letters gets them dropped from its slug,
# where GitHub keeps them; keep headings that are linked to in ASCII.
set -uo pipefail

# The anchors of one Markdown file, one a line.
slugs() {
    awk '
        /^[ ]{0,3}(```|~~~)/ { code = !code; next }
        code { next }
        /^#{1,6}[ \t]/ {
            t = $0
            sub(/^#+[ \t]+/, "", t); sub(/[ \t]+#+[ \t]*$/, "", t); sub(/[ \t]+$/, "", t)
            while (match(t, /\[[^]]*\]\([^)]*\)/)) {      # [text](url) -> text
                link = substr(t, RSTART, RLENGTH); sub(/\]\(.*$/, "", link); sub(/^\[/, "", link)
                t = substr(t, 1, RSTART - 1) link substr(t, RSTART + RLENGTH)
            }
            t = tolower(t)
            gsub(/[^a-z0-9 _-]/, "", t)
            gsub(/ /, "-", t)
            n = seen[t]++
            print (n ? t "-" n : t)
        }' "$1"
}

# The links of one Markdown file: LINE<TAB>TARGET, one a line.
links() {
    awk '
        /^[ ]{0,3}(```|~~~)/ { code = !code; next }
        code { next }
        {
            line = $0
            gsub(/`[^`]*`/, "", line)                      # code spans are not links
            if (match(line, /^[ ]{0,3}\[[^]]+\]:[ \t]*[^ \t]+/)) {   # [ref]: target
                ref = substr(line, RSTART, RLENGTH); sub(/^[^:]*:[ \t]*/, "", ref)
                print NR "\t" ref
            }
            while (match(line, /\]\([^)]*\)/)) {
                target = substr(line, RSTART + 2, RLENGTH - 3)
                line = substr(line, RSTART + RLENGTH)
                sub(/^[ \t]*</, "", target); sub(/>[ \t]*$/, "", target)
                sub(/[ \t]+"[^"]*"$/, "", target)          # a title
                print NR "\t" target
            }
        }' "$1"
}

broken=0
for file in "$@"; do
    dir=$(dirname "$file")
    while IFS=$'\t' read -r line target; do
        case $target in
            "" | [a-zA-Z]*:*) continue ;;   # a URL with a scheme
        esac
        path=${target%%#*}
        anchor=
        [ "$path" != "$target" ] && anchor=${target#*#}
        if [ -z "$path" ]; then dest=$file; else dest=$dir/$path; fi
        if [ ! -e "$dest" ]; then
            echo "$file:$line: $target: no such file"
            broken=1
            continue
        fi
        [ -n "$anchor" ] || continue
        case $dest in
            *.md) ;;
            *) echo "$file:$line: $target: an anchor into a file that is not Markdown"; broken=1; continue ;;
        esac
        if ! slugs "$dest" | grep -qxF -- "$anchor"; then
            echo "$file:$line: $target: no heading with that anchor"
            broken=1
        fi
    done < <(links "$file")
done
exit $broken
