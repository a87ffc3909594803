# Turns a `--help` flag table into man-page roff: one .TP entry per flag.
# Lines look like "  -t, --threads V   help text (ENV)"; the names are the leading tokens
# that start with '-' (with their "V" value mark), the rest is the help.
function esc(s) {
    gsub(/\\/, "\\e", s)
    gsub(/-/, "\\-", s)
    return s
}
/^  -/ {
    n = split(substr($0, 3), tok, " ")
    names = ""; i = 1
    while (i <= n && tok[i] ~ /^-/) {
        t = tok[i]; sub(/,$/, "", t)
        names = names (names == "" ? "" : ", ") "\\fB" esc(t) "\\fR"
        i++
        if (i <= n && tok[i] == "V") { names = names " \\fIvalue\\fR"; i++ }
    }
    help = ""
    for (; i <= n; i++) help = help (help == "" ? "" : " ") tok[i]
    sub(/^[.']/, "\\\\\\&&", help)
    print ".TP"
    print names
    print esc(help)
}
