/* text/jinja and text/chat_template without ../shared: statements, filters, tests, methods and
 * operators against renders produced by Jinja2 3.1 in Hugging Face's environment, plus error
 * paths, limits, allocation-failure injection, concurrent renders and the chat-template
 * helpers. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "text/chat_template.h"
#include "text/jinja/jinja.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/mem.h"
#include "util/thread.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

struct render_case {
    const char *src;
    const char *want; // NULL: Jinja2 raised
};

/* Expected outputs below were rendered by Jinja2 3.1 (ImmutableSandboxedEnvironment,
 * trim_blocks, lstrip_blocks, loopcontrols, tojson(ensure_ascii=False), strftime_now pinned to
 * 2026-01-02 03:04:05) over CASE_CONTEXT. */
static const char CASE_CONTEXT[] =
    "{\"s\": \"Hello World\", \"u\": \"\303\234n\303\257c\303\266d\303\251 \342\234\223 "
    "\344\275\240\345\245\275\", \"n\": 3, \"f\": 2.5, \"l\": [3, 1, 2], \"e\": [], \"d\": {\"b\": "
    "1, \"a\": [1, 2], \"c\": {\"x\": \"y\"}}, \"msgs\": [{\"role\": \"user\", \"content\": "
    "\"hi\"}, {\"role\": \"assistant\", \"content\": \"yo\", \"tool_calls\": [{\"function\": "
    "{\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}], \"none\": null, \"t\": true, \"ws\": \"  "
    "pad me \\n\", \"words\": [\"b\", \"A\", \"c\", \"a\"], \"fl\": [1.5, 2.0, 1e+20, 1e-07, 0.1], "
    "\"big\": 12345678901234}";

static const struct render_case render_cases[] = {
    {"{{ s }}|{{ n }}|{{ f }}|{{ l }}|{{ d }}|{{ none }}|{{ t }}|{{ e }}",
     "Hello World|3|2.5|[3, 1, 2]|{'b': 1, 'a': [1, 2], 'c': {'x': 'y'}}|None|True|[]"},
    {"{{ 1.0 }} {{ 1e20 }} {{ 1e-7 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 // 2 }} {{ "
     "-7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 % 2 }}",
     "1.0 1e+20 1e-07 0.30000000000000004 2.5 2 -4 2 1024 0.5 1.5"},
    {"{{ fl }} {{ fl | tojson }} {{ big }} {{ 3 * 'ab' }} {{ [1] * 3 }}",
     "[1.5, 2.0, 1e+20, 1e-07, 0.1] [1.5, 2.0, 1e+20, 1e-07, 0.1] 12345678901234 ababab [1, 1, 1]"},
    {"{{ s | upper }} {{ s | lower }} {{ s | title }} {{ \"hello-world foo(bar\" | title }} {{ "
     "\"hELLO\" | capitalize }} {{ u | upper }} {{ u | lower }}",
     "HELLO WORLD hello world Hello World Hello-World Foo(Bar Hello "
     "\303\234N\303\217C\303\226D\303\211 \342\234\223 \344\275\240\345\245\275 "
     "\303\274n\303\257c\303\266d\303\251 \342\234\223 \344\275\240\345\245\275"},
    {"{{ ws | trim }}|{{ ws.strip() }}|{{ ws.lstrip() }}|{{ ws.rstrip() }}|{{ "
     "\"xxhixx\".strip(\"x\") }}|{{ \"--a--\" | trim(\"-\") }}",
     "pad me|pad me|pad me \n|  pad me|hi|a"},
    {"{{ s.split() }} {{ s.split(\"o\") }} {{ \"a,b,,c\".split(\",\") }} {{ \"a b c d\".split(\" "
     "\", 1) }} {{ \"a b c d\".rsplit(\" \", 1) }} {{ \"  a  b  \".split() }} {{ \"a b  "
     "c\".split(None, 1) }}",
     "['Hello', 'World'] ['Hell', ' W', 'rld'] ['a', 'b', '', 'c'] ['a', 'b c d'] ['a b c', 'd'] "
     "['a', 'b'] ['a', 'b  c']"},
    {"{{ s.startswith(\"He\") }} {{ s.endswith((\"x\", \"ld\")) }} {{ s.replace(\"l\", \"L\") }} "
     "{{ s.replace(\"l\", \"L\", 1) }} {{ s.find(\"o\") }} {{ s.count(\"l\") }} {{ "
     "u.find(\"\342\234\223\") }}",
     "True True HeLLo WorLd HeLlo World 4 3 8"},
    {"{{ \"{} and {}\".format(1, \"x\") }} {{ \"{0}{1}{0}\".format(\"a\", \"b\") }} {{ "
     "\"{name}!\".format(name=\"z\") }}",
     "1 and x aba z!"},
    {"{{ l | length }} {{ s | length }} {{ u | length }} {{ d | length }} {{ l | first }} {{ l | "
     "last }} {{ l | sort }} {{ l | sort(reverse=true) }} {{ words | sort }} {{ words | "
     "sort(case_sensitive=true) }}",
     "3 11 12 3 3 2 [1, 2, 3] [3, 2, 1] ['A', 'a', 'b', 'c'] ['A', 'a', 'b', 'c']"},
    {"{{ l | join(\", \") }} {{ l | join }} {{ msgs | map(attribute=\"role\") | join(\"|\") }} {{ "
     "msgs | join(\",\", attribute=\"role\") }}",
     "3, 1, 2 312 user|assistant user,assistant"},
    {"{{ l | sum }} {{ l | min }} {{ l | max }} {{ words | max }} {{ words | unique | list }} {{ l "
     "| reverse | list }} {{ s | reverse }} {{ l | list }} {{ s | list }}",
     "6 1 3 c ['b', 'A', 'c'] [2, 1, 3] dlroW olleH [3, 1, 2] ['H', 'e', 'l', 'l', 'o', ' ', 'W', "
     "'o', 'r', 'l', 'd']"},
    {"{{ d | tojson }} {{ d | tojson(indent=2) }} {{ d | tojson(sort_keys=true) }} {{ u | tojson "
     "}} {{ \"a\\\"b\\\\c\n\\t\\x01\" | tojson }} {{ msgs | tojson(separators=(\",\", \":\")) }}",
     "{\"b\": 1, \"a\": [1, 2], \"c\": {\"x\": \"y\"}} {\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n "
     " ],\n  \"c\": {\n    \"x\": \"y\"\n  }\n} {\"a\": [1, 2], \"b\": 1, \"c\": {\"x\": \"y\"}} "
     "\"\303\234n\303\257c\303\266d\303\251 \342\234\223 \344\275\240\345\245\275\" "
     "\"a\\\"b\\\\c\\n\\t\\u0001\" "
     "[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"yo\",\"tool_"
     "calls\":[{\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]}]"},
    {"{{ d | items | list }} {{ d.items() | list }} {{ d.keys() | list }} {{ d.values() | list }} "
     "{{ d | dictsort }} {{ d.get(\"zz\", \"dflt\") }} {{ d.get(\"b\") }} {{ d.get(\"q\") }}",
     "[('b', 1), ('a', [1, 2]), ('c', {'x': 'y'})] [('b', 1), ('a', [1, 2]), ('c', {'x': 'y'})] "
     "['b', 'a', 'c'] [1, [1, 2], {'x': 'y'}] [('a', [1, 2]), ('b', 1), ('c', {'x': 'y'})] dflt 1 "
     "None"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "b=1;a=[1, 2];c={'x': 'y'};"},
    {"{% for x in l %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 "
     "}}/{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem }}/{{ loop.nextitem "
     "}}/{{ loop.cycle(\"a\",\"b\") }} {% endfor %}",
     "1/0/3/2/True/False/3//1/a 2/1/2/1/False/False/3/3/2/b 3/2/1/0/False/True/3/1//a "},
    {"{% for x in l if x > 1 %}{{ x }}:{{ loop.length }} {% else %}none{% endfor %}", "3:2 2:2 "},
    {"{% for x in e %}{{ x }}{% else %}empty{% endfor %}", "empty"},
    {"{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif "
     "%}{{ x }}{% endfor %}",
     "3"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = (1, 2) %}{{ c }}{% set t1 = (1,) %}{{ t1 }}{{ "
     "() }}",
     "12(1, 2)(1,)()"},
    {"{% set ns = namespace(x=0, y=\"a\") %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% "
     "endfor %}{{ ns.x }}{{ ns.y }}",
     "3a"},
    {"{% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}", "1"},
    {"{% macro m(a, b=2, c=\"z\") %}[{{ a }}{{ b }}{{ c }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ "
     "m(1, c=\"q\") }}{{ m() }}",
     "[12z][13z][12q][2z]"},
    {"{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
     "54321"},
    {"{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}inner{% endcall %}", "<inner>"},
    {"{% macro w2() %}<{{ caller(5) }}>{% endmacro %}{% call(v) w2() %}v={{ v }}{% endcall %}",
     "<v=5>"},
    {"{% filter upper %}hello {{ s }}{% endfilter %}", "HELLO HELLO WORLD"},
    {"{% set blk %}  block {{ n }}  {% endset %}[{{ blk }}]{% set blk2 | trim %}  x  {% endset "
     "%}[{{ blk2 }}]",
     "[  block 3  ][x]"},
    {"{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ s[::-1] }} {{ s[1:4] }} {{ "
     "u[0:3] }} {{ u[::-1] }} {{ l[10] }} {{ s[-3:] }} {{ l[::2] }}",
     "3 2 [1, 2] [3, 1] [2, 1, 3] dlroW olleH ell \303\234n\303\257 \345\245\275\344\275\240 "
     "\342\234\223 \303\251d\303\266c\303\257n\303\234  rld [3, 2]"},
    {"{{ 1 in l }} {{ 5 not in l }} {{ \"ell\" in s }} {{ \"b\" in d }} {{ not t }} {{ t and n }} "
     "{{ none or \"x\" }} {{ e or \"empty\" }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 5 }}",
     "True True True True False 3 x empty True False"},
    {"{{ \"yes\" if t else \"no\" }} {{ \"yes\" if none }}| {{ s ~ n ~ none }} {{ \"a\" + \"b\" }} "
     "{{ l + [4] }}",
     "yes | Hello World3None ab [3, 1, 2, 4]"},
    {"{{ n is odd }} {{ n is even }} {{ n is divisibleby 3 }} {{ n is number }} {{ f is float }} "
     "{{ n is integer }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ l is sequence "
     "}} {{ none is none }} {{ zz is defined }} {{ zz is undefined }} {{ t is true }} {{ t is "
     "boolean }} {{ n is eq 3 }} {{ n is ne 3 }} {{ \"a\" is lower }} {{ \"A\" is upper }} {{ n is "
     "in l }} {{ m is callable }}",
     "True False True True True True True True True True True False True True True True False True "
     "True True True"},
    {"{{ msgs | selectattr(\"role\", \"equalto\", \"user\") | list }} {{ msgs | "
     "rejectattr(\"role\", \"eq\", \"user\") | map(attribute=\"content\") | list }} {{ msgs | "
     "selectattr(\"tool_calls\") | list | length }} {{ l | select(\"odd\") | list }} {{ l | "
     "reject(\"odd\") | list }} {{ l | map(\"string\") | list }} {{ [\"a\", \"b\"] | "
     "map(\"upper\") | list }}",
     "[{'role': 'user', 'content': 'hi'}] ['yo'] 1 [3, 1] [2] ['3', '1', '2'] ['A', 'B']"},
    {"{{ zz | default(\"dflt\") }} {{ \"\" | default(\"dflt\") }} {{ \"\" | default(\"dflt\", "
     "true) }} {{ none | d(\"x\", true) }} {{ zz }}|{{ zz | length }}",
     "dflt  dflt x |0"},
    {"{{ \"3\" | int + 1 }} {{ \"3.7\" | float }} {{ 3.7 | int }} {{ \"x\" | int }} {{ 2.567 | "
     "round(2) }} {{ 2.5 | round }} {{ -3 | abs }} {{ n | string + \"x\" }} {{ 42 | string | "
     "length }}",
     "4 3.7 3 0 2.57 2.0 3 3x 2"},
    {"{{ \"a\nb\n\nc\" | indent(2) }}|{{ \"a\nb\" | indent(2, true) }}|{{ \"a\n\nb\" | indent(4, "
     "blank=true) }}|{{ \"x\ny\" | indent(\"> \") }}",
     "a\n  b\n\n  c|  a\n  b|a\n    \n    b|x\n> y"},
    {"{{ \"<a href='x'>&</a>\" | e }} {{ \"<b>\" | escape }} {{ \"one two  three\" | wordcount }} "
     "{{ l | batch(2) | list }} {{ \"ab\" | center(6) }}| {{ \"hello world foo bar\" | "
     "truncate(11) }} {{ \"%s-%d\" | format(\"a\", 3) }} {{ \"%05.1f|%x|%r\" % (3.14159, 255, "
     "\"q\") }}",
     "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt; &lt;b&gt; 3 [[3, 1], [2]]   ab  | hello... a-3 "
     "003.1|ff|'q'"},
    {"{{ strftime_now(\"%Y-%m-%d %H:%M:%S %b %A %d\") }}", "2026-01-02 03:04:05 Jan Friday 02"},
    {"{{ raise_exception(\"boom\") }}", NULL},
    {"{{ zz.attr }}", NULL},
    {"{{ none.attr }}|{{ s.nosuch }}|{{ d.zz }}|{{ d.b }}|{{ d[\"c\"][\"x\"] }}|{{ d.c.x }}",
     "|||1|y|y"},
    {"{{ \"a\" + 1 }}", NULL},
    {"{{ l.append(4) }}", NULL},
    {"{{ undefined_fn() }}", NULL},
    {"{{ s | nosuchfilter }}", NULL},
    {"{% for i in range(10) %}{{ i }}{% endfor %} {{ range(2, 10, 3) | list }} {{ range(5, 0, -2) "
     "| list }}",
     "0123456789 [2, 5, 8] [5, 3, 1]"},
    {"{{ dict(a=1, b=2) }} {{ {\"k\": [1, {\"x\": none}], 2: \"two\"} }} {{ {\"k\": \"it's\"} }} "
     "{{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}",
     "{'a': 1, 'b': 2} {'k': [1, {'x': None}], 2: 'two'} {'k': \"it's\"} [\"it's\", 'say \"hi\"', "
     "'both \\' \"']"},
    {"{{ msgs[1].tool_calls[0].function.arguments | tojson }} {{ "
     "msgs[1][\"tool_calls\"][0][\"function\"][\"name\"] }}",
     "{\"a\": 1} f"},
    {"{%- if t -%}   trimmed   {%- endif -%}|", "trimmed|"},
    {"  {% if t %}", NULL},
    {"    lstrip", "    lstrip"},
    {"  {% endif %}", NULL},
    {"end", "end"},
    {"{# comment #}", ""},
    {"after comment", "after comment"},
    {"{%+ if t %}keep{% endif %}", "keep"},
    {"   {{ s }}   ", "   Hello World   "},
    {"{% if t %}x{% endif +%}", "x"},
    {"y", "y"},
    {"{% raw %}{{ not parsed }}{% endraw %}", "{{ not parsed }}"},
    {"{{ 'a' 'b' }} {{ \"\\u00e9\\x41\\101\n\" | tojson }}", "ab \"\303\251AA\\n\""},
    {"{{ s is not string }} {{ not s is string }} {{ -n | abs }} {{ (1, 2) | list }} {{ l | "
     "map(\"int\") | sum }}",
     "False False 3 [1, 2] 6"},
    {"{{ loop }}", ""},
    {"{{ msgs | tojson(indent=4) }}",
     "[\n    {\n        \"role\": \"user\",\n        \"content\": \"hi\"\n    },\n    {\n        "
     "\"role\": \"assistant\",\n        \"content\": \"yo\",\n        \"tool_calls\": [\n          "
     "  {\n                \"function\": {\n                    \"name\": \"f\",\n                 "
     "   \"arguments\": {\n                        \"a\": 1\n                    }\n               "
     " }\n            }\n        ]\n    }\n]"},
    {"{{ [] | tojson(indent=2) }} {{ {} | tojson }} {{ {\"a\": []} | tojson(indent=2) }}",
     "[] {} {\n  \"a\": []\n}"},
    {"{{ \"%.2f\" % 2 }} {{ \"%d%%\" % 5 }} {{ \"%s\" % none }} {{ \"%s, %s\" % (\"a\", [1]) }}",
     "2.00 5% None a, [1]"},
    {"{{ 1 == 1.0 }} {{ true == 1 }} {{ \"1\" == 1 }} {{ [1, 2] == [1, 2] }} {{ {\"a\": 1} == "
     "{\"a\": 1} }} {{ none == none }}",
     "True True False True True True"},
    {"{{ s | replace(\"o\", \"0\") | upper | replace(\"L\", \"1\") }} {{ s.upper().lower().title() "
     "}} {{ \"a-b_c d\".title() }} {{ \"x\".join([\"1\", \"2\"]) }}",
     "HE110 W0R1D Hello World A-B_C D 1x2"},
    {"{{ \"%s\" | format(l) }} {{ l | string }} {{ d | string }} {{ t | string }} {{ none | string "
     "}} {{ 1.5 | string }}",
     "[3, 1, 2] [3, 1, 2] {'b': 1, 'a': [1, 2], 'c': {'x': 'y'}} True None 1.5"},
    {"{{ d | dictsort(reverse=true) }} {{ {\"b\": 2, \"a\": 3} | dictsort(by=\"value\") }} {{ "
     "{\"B\": 1, \"a\": 2} | dictsort }}",
     "[('c', {'x': 'y'}), ('b', 1), ('a', [1, 2])] [('b', 2), ('a', 3)] [('a', 2), ('B', 1)]"},
    {"{{ u[2] }} {{ u | first }} {{ u | last }} {{ u.split(\" \") }} {{ u | center(20) }}| {{ u | "
     "wordcount }}",
     "\303\257 \303\234 \345\245\275 ['\303\234n\303\257c\303\266d\303\251', '\342\234\223', "
     "'\344\275\240\345\245\275']     \303\234n\303\257c\303\266d\303\251 \342\234\223 "
     "\344\275\240\345\245\275    | 2"},
    {"{{ [3, 1, 2] | sort | first }} {{ msgs | sort(attribute=\"role\") | map(attribute=\"role\") "
     "| list }} {{ msgs | map(attribute=\"nosuch\", default=\"dd\") | list }} {{ msgs | "
     "map(attribute=\"nosuch\") | list }}",
     "1 ['assistant', 'user'] ['dd', 'dd'] [Undefined, Undefined]"},
    {"{{ s.title() }} {{ \"hello   world\".title() }} {{ \"123abc\".capitalize() }} {{ s.isdigit() "
     "}} {{ \"123\".isdigit() }} {{ \"ab\".isalpha() }}",
     "Hello World Hello   World 123abc False True True"},
    {"{{ \"a\nb\\r\nc\".splitlines() }} {{ \"abc\".rfind(\"c\") }} {{ \"  x \".strip(\" x\") }} {{ "
     "\"banana\".lstrip(\"ab\") }} {{ \"banana\".rstrip(\"an\") }}",
     "['a', 'b', 'c'] 2  nana b"},
    {"a\n  {% if t %}\n  b\n  {% endif %}\nc", "a\n  b\nc"},
    {"a\n  {%- if t %}\n  b\n  {%- endif %}\nc", "a  bc"},
    {"a  {% if t %}b{% endif %}  c", "a  b  c"},
    {"{% if t %}  \n  x\n{% endif %}", "  \n  x\n"},
    {"  {{ s }}\n  {% for x in l %}\n    {{ x }}\n  {% endfor %}\n",
     "  Hello World\n    3\n    1\n    2\n"},
    {"{% for x in l -%}\n  {{ x }}\n{%- endfor %}", "312"},
    {"{%- for x in l %} {{ x }} {% endfor -%}", " 3  1  2 "},
    {"{{- s -}}   {{- n }}", "Hello World3"},
    {"x {#- c -#} y", "xy"},
    {"x\n  {# c #}\n  y", "x\n  y"},
    {"x\n  {#- c #}  y\n", "x  y"},
    {"{% if t %}a{% endif %}\n\n{% if t %}b{% endif %}", "a\nb"},
    {"line1\n    {%+ if t %}keep{% endif %}\n", "line1\n    keep"},
    {"{% set x = 5 %}\n  {{ x }}", "  5"},
    {"{%- macro f(a) -%}\n  [{{ a }}]\n{%- endmacro -%}\n{{ f(1) }}{{ f(2) }}", "[1][2]"},
    {"\n\n{{ s }}\n\n", "\n\nHello World\n"},
    {"text\\r\nmore\\r\n{% if t %}\\r\nx\\r\n{% endif %}\\r\n", "text\\r\nmore\\r\n\\r\nx\\r\n\\r"},
    {"a{% if t +%}\nb{% endif %}", "a\nb"},
    {"{% for m in msgs %}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}",
     "user,assistant"},
    {"{{ '{%' }} {{ \"%}\" }} {{ '}}' }}", "{% %} }}"},
    {"{{ d['a'][1] }} {{ d.a.1 }} {{ l.0 }}", "2 2 3"},
    {"   {% raw %}  x  {% endraw %}  \n y", "  x    \n y"},
    {"{{ x | default(5) }}{% set x = 3 %}{{ x }}", "53"},
    {"{% if s is string and s | length > 3 %}long{% elif s %}short{% else %}none{% endif %}",
     "long"},
    {"{% if none %}a{% elif 0 %}b{% elif \"\" %}c{% else %}d{% endif %}", "d"},
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}", "37"},
    {"{% for x in d %}{{ x }}{% endfor %} {% for c in \"h\303\251llo\" %}{{ c }}.{% endfor %}",
     "bac h.\303\251.l.l.o."},
    {"{% for x in l %}{% for y in l %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
     "1231|1232|1233|"},
    {"{% set ns = namespace(found=false) %}{% for m in msgs %}{% if m.role == \"assistant\" %}{% "
     "set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}",
     "True"},
    {"{% macro outer() %}{{ inner() }}{% endmacro %}{% macro inner() %}in{% endmacro %}{{ outer() "
     "}}",
     "in"},
    {"{% set g = \"global\" %}{% macro sees() %}{{ g }}{% endmacro %}{{ sees() }}", "global"},
    {"{% macro kw(a) %}{{ a }}{{ kwargs }}{{ varargs }}{% endmacro %}{{ kw(1, 2, 3, z=4) }}",
     "1{'z': 4}(2, 3)"},
    {"{{ msgs[0].content is defined }} {{ msgs[0].zzz is defined }} {{ msgs[5] is defined }}",
     "True False False"},
    {"{{ \"x\" if msgs[0][\"role\"] == \"user\" else \"y\" }}", "x"},
    {"{{ (msgs | last).role }} {{ msgs[-1]['content'] }}", "assistant yo"},
    {"{{ s[100:] }}|{{ s[-100:2] }}|{{ l[5:1:-1] }}|{{ l[::-2] }}", "|He|[2]|[2, 3]"},
    {"{{ 1 + 2 * 3 - 4 / 2 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 10 - 2 - 3 }} "
     "{{ not 1 == 2 }} {{ 1 ~ 2 + 3 }}",
     NULL},
    {"{{ \"a\" < \"b\" }} {{ [1, 2] < [1, 3] }} {{ 1 < 2.5 }} {{ none == false }} {{ 0 == false }}",
     "True True True False True"},
    {"{{ \"abc\" < 1 }}", NULL},
    {"{{ none + 1 }}", NULL},
    {"{{ d.nosuch.deeper }}", NULL},
    {"{{ l[1:2:0] }}", NULL},
    {"{{ 1 / 0 }}", NULL},
    {"{{ none | items | list }} {{ zz | items | list }}", NULL},
    {"{{ \"a\" in none }}", NULL},
    {"{{ none | length }}", NULL},
    {"{% for x in none %}{% endfor %}", NULL},
    {"{% for x in n %}{% endfor %}", NULL},
    {"{% set a, b = [1] %}", NULL},
    {"{% macro m() %}{% endmacro %}{{ m.x }}", ""},
    {"{{ l | tojson }} {{ l | map(\"string\") | tojson }}", NULL},
    {"{{ zz | tojson }}", NULL},
    {"{{ msgs | selectattr(\"role\", \"in\", [\"user\"]) | map(attribute=\"content\") | first }}",
     "hi"},
    {"{{ [\"a\", \"b\"] | map(\"upper\") | join(\"-\") }} {{ l | map(\"abs\") | list }} {{ msgs | "
     "map(attribute=\"tool_calls\") | select(\"defined\") | list | length }}",
     "A-B [3, 1, 2] 1"},
    {"{{ d | dictsort | first }} {{ d | list }} {{ d | first }}",
     "('a', [1, 2]) ['b', 'a', 'c'] b"},
    {"{% for k, v in d | dictsort %}{{ k }}{% endfor %}", "abc"},
    {"{{ \"x\" ~ none ~ zz ~ t ~ 1.0 }}", "xNoneTrue1.0"},
    {"{{ \"%s\" % (1, 2) }}", NULL},
    {"{{ \"{}\".format() }}", NULL},
    {"{{ [1, 2, 3][1:] | length }} {{ \"abc\"[1] }} {{ \"abc\"[-1] }} {{ \"abc\"[5] }}|",
     "2 b c |"},
    {"{% if msgs[0].content.startswith(\"h\") %}yes{% endif %} {{ msgs[0].content.split(\"i\")[0] "
     "}}",
     "yes h"},
    {"{{ \"a b\".split(\" \")[1] | upper }}", "B"},
    {"{{ t | int }} {{ \"12\" | int * 2 }} {{ \"0x1A\" | int(0, 16) }} {{ 3 | float }} {{ \"1e3\" "
     "| float }}",
     "1 24 26 3.0 1000.0"},
    {"{{ [1, [2, 3]] | tojson(indent=2) }} {{ {\"a\": {\"b\": {}}} | tojson(indent=1) }}",
     "[\n  1,\n  [\n    2,\n    3\n  ]\n] {\n \"a\": {\n  \"b\": {}\n }\n}"},
    {"{{ \"\303\251\" | tojson }} {{ \"\\u2028\" | tojson }} {{ \"\\x7f\" | tojson }}",
     "\"\303\251\" \"\342\200\250\" \"\177\""},
    {"{{ 1e16 }} {{ 1e15 }} {{ 123456789.123 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 1.5e300 * "
     "1e10 }} {{ 3.0 / 7 }}",
     "1e+16 1000000000000000.0 123456789.123 0.0001 1e-05 -0.0 inf 0.42857142857142855"},
    {"{{ 9007199254740993 }} {{ 2 ** 62 }} {{ 5 // 0.3 }} {{ -5 % 0.3 }}",
     "9007199254740993 4611686018427387904 16.0 0.09999999999999981"},
    {"{{ l | batch(2, \"x\") | list }} {{ \"abcdef\" | truncate(5) }} {{ \"a b c d e f g\" | "
     "truncate(9, true) }} {{ \"hello\" | truncate(3, end=\"\") }}",
     "[[3, 1], [2, 'x']] abcdef a b c d e f g hello"},
    {"{{ \"Hello\" | center(10) }}|{{ \"Hello\" | center(9) }}|{{ \"hi\" | center(7) }}|",
     "  Hello   |  Hello  |   hi  |"},
    {"{{ \" a \" | wordcount }} {{ \"it's a test_ok 42\" | wordcount }}", "1 5"},
    {"{{ s | list | unique | list | length }} {{ [\"A\", \"a\", \"b\"] | unique | list }} {{ "
     "[\"A\", \"a\"] | unique(case_sensitive=true) | list }}",
     "8 ['A', 'b'] ['A', 'a']"},
    {"{{ [3, 1] | sort | list }} {{ [\"b\", \"A\"] | sort | list }} {{ [{\"n\": 2}, {\"n\": 1}] | "
     "sort(attribute=\"n\") | map(attribute=\"n\") | list }}",
     "[1, 3] ['A', 'b'] [1, 2]"},
    {"{{ [1, \"a\"] | sort }}", NULL},
    {"{{ namespace(a=1) }} {{ dict(x=1) | tojson }} {{ namespace(a=1).a }}",
     "<Namespace {'a': 1}> {\"x\": 1} 1"},
    {"{{ loop.index }}", NULL},
    {"{% for x in l %}{{ loop.changed(x) }}{% endfor %}", "TrueTrueTrue"},
    {"{{ \"a b c d\".split(\" \", 1) }} {{ \"a b c d\".rsplit(\" \", 1) }} {{ \"a b c "
     "d\".rsplit(\" \", 2) }} {{ \"a b c d\".rsplit(\" \") }} {{ \"a,,b,\".rsplit(\",\") }} {{ "
     "\",a,,b,\".split(\",\") }} {{ \"abc\".split(\"abc\") }} {{ \"\".split(\",\") }} {{ "
     "\"\".split() }}",
     "['a', 'b c d'] ['a b c', 'd'] ['a b', 'c', 'd'] ['a', 'b', 'c', 'd'] ['a', '', 'b', ''] ['', "
     "'a', '', 'b', ''] ['', ''] [''] []"},
    {"{{ \"  a  b  c  \".split() }} {{ \"  a  b  c  \".split(None, 1) }} {{ \"  a  b  c  "
     "\".rsplit(None, 1) }} {{ \"  a  b  c  \".rsplit() }} {{ \"  a  b  c  \".split(None, 0) }} {{ "
     "\"  a  b  c  \".rsplit(None, 0) }} {{ \"a\\tb\nc\".split() }}",
     "['a', 'b', 'c'] ['a', 'b  c  '] ['  a  b', 'c'] ['a', 'b', 'c'] ['a  b  c  '] ['  a  b  c'] "
     "['a', 'b', 'c']"},
    {"{{ \"xxaxxbxx\".split(\"xx\") }} {{ \"xxaxxbxx\".rsplit(\"xx\", 1) }} {{ "
     "\"aaa\".split(\"aa\") }} {{ \"aaa\".rsplit(\"aa\") }} {{ "
     "\"a</think>b</think>c\".split(\"</think>\")[-1] }} {{ \"a</think>b\".rsplit(\"</think>\", "
     "1)[0] }}",
     "['', 'a', 'b', ''] ['xxaxxb', ''] ['', 'a'] ['a', ''] c a"},
    {"{{ zz == none }} {{ zz != none }} {{ zz | string }}|{{ zz | trim }}|{{ zz | lower }}|{{ zz | "
     "join }}|{{ zz | first }}|{{ zz | list }}|{{ zz | default(none) }}|{{ none | trim }}|{{ none "
     "| int }}",
     "False True |||||[]|None|None|0"},
    {"{{ zz < 1 }}", NULL},
    {"{{ zz[0] }}", NULL},
    {"{{ zz | tojson }}", NULL},
    {"{{ zz.strip() }}", NULL},
    {"{% set x = x | default([]) + [1] %}{{ x }} {{ \"user\" in (\"user\", \"assistant\") }} {{ "
     "loop is defined }}",
     "[1] True False"},
    {"{% macro foo(x, y=x ~ \"!\") %}{{ x }}{{ y }}{% endmacro %}{{ foo(x=1) }}{{ foo(2, y=3) }}",
     "11!23"},
    {"{% macro foo() %}{{ varargs }}{% endmacro %}{{ foo(1, 2) }}", "(1, 2)"},
    {"{{ d.get(\"c\", {}).get(\"x\") }} {{ d.get(\"zz\", {}).get(\"x\", \"no\") }} {{ (d.c).x }}",
     "y no y"},
    {"{% for m in msgs %}{% for tc in m.tool_calls | default([]) %}{{ tc.function.name }}({{ "
     "tc.function.arguments | tojson }}){% endfor %}{% endfor %}",
     "f({\"a\": 1})"},
    {"{% for m in msgs | selectattr(\"tool_calls\", \"defined\") %}{{ m.role }}{% endfor %}",
     "assistant"},
    {"{% for i in range(3) %}{% for j in range(3) %}{% if j > i %}{% break %}{% endif %}{{ i }}{{ "
     "j }} {% endfor %}{% endfor %}",
     "00 10 11 20 21 22 "},
    {"{% for x in [1, 2, 3] %}{% if loop.index is divisibleby(2) %}even{% else %}odd{% endif %}{% "
     "endfor %}",
     "oddevenodd"},
    {"{{ \"abc\" | list | reverse | join }} {{ [1, 2] | first is number }} {{ ([1] + [2]) | length "
     "}}",
     "cba True 2"},
    {"{%- set ns = namespace(items=[]) -%}{%- for x in l -%}{%- set ns.items = ns.items + [x * 2] "
     "-%}{%- endfor -%}{{ ns.items }}",
     "[6, 2, 4]"},
    {"{{ msgs | map(attribute=\"role\") | map(\"upper\") | join(\",\") }}", "USER,ASSISTANT"},
    {"{{ \"Hi %s, you are %d\" % (\"Bob\", 30) }} {{ \"%-5s|\" % \"ab\" }} {{ \"%5.2f\" % 3.14159 "
     "}} {{ \"%e\" % 12345.678 }} {{ \"%g\" % 0.0001 }}",
     "Hi Bob, you are 30 ab   |  3.14 1.234568e+04 0.0001"},
    {"{{ \"tab\\there\" }} {{ 'single \\'quoted\\'' }} {{ \"uni \\u00e9 \\U0001F600\" }}",
     "tab\there single 'quoted' uni \303\251 \360\237\230\200"},
    {"{% if true %}{% set inner = 1 %}{% endif %}{{ inner }}", "1"},
    {"{{ -1 if t else 1 }} {{ [1, 2, 3] | sum(start=10) }} {{ [{\"a\": 1}, {\"a\": 2}] | "
     "sum(attribute=\"a\") }}",
     "-1 16 3"},
    {"{{ \"a\" * 0 }}|{{ [1] * -1 }}|{{ 7 // -2 }} {{ 7 % -2 }} {{ -7.5 // 2 }}", "|[]|-4 -1 -4.0"},
    {"{{ true + 1 }} {{ 1 + 1.5 }} {{ 2 * 2.5 }} {{ 10 / 5 }} {{ 3 ** 0.5 }}",
     "2 2.5 5.0 2.0 1.7320508075688772"},
    {"{{ 1 if \"\" else 2 }} {{ 1 if [] else 2 }} {{ 1 if {} else 2 }} {{ 1 if 0.0 else 2 }} {{ 1 "
     "if \"0\" else 2 }}",
     "2 2 2 2 1"},
    {"{{ [1, 2, 3] | select(\"greaterthan\", 1) | list }} {{ [1, 2, 3] | reject(\"equalto\", 2) | "
     "list }} {{ [\"a\", \"B\"] | select(\"lower\") | list }}",
     "[2, 3] [1, 3] ['a']"},
    {"{{ {\"a\": 1, \"b\": 2} | dictsort(false, \"value\", true) }}", "[('b', 2), ('a', 1)]"},
    {"{{ \"x\" | indent }}|{{ \"a\nb\" | indent(first=true) }}|{{ \"\" | indent(2, true) }}|",
     "x|    a\n    b|  |"},
    {"{{ \"abc\" is sameas \"abc\" }} {{ none is sameas none }} {{ true is sameas true }}",
     "False True True"},
    {"{% set a = {\"k\": 1} %}{{ a.k }}{{ a[\"k\"] }}{{ a.items() | list }}", "11[('k', 1)]"},
    {"{{ msgs[0] | tojson(indent=2, sort_keys=true) }}",
     "{\n  \"content\": \"hi\",\n  \"role\": \"user\"\n}"},
    {"{{ [none, true, 1.0, \"s\"] | tojson }} {{ {\"a\": none} | tojson }} {{ {1: \"x\", none: "
     "\"y\", true: \"z\"} | tojson }}",
     "[null, true, 1.0, \"s\"] {\"a\": null} {\"1\": \"z\", \"null\": \"y\"}"},
    {"{% set count = 0 %}{% for x in l %}{% set count = count + 1 %}{{ count }}{% endfor %}{{ "
     "count }}",
     "1110"},
    {"{% for x in l %}{% if loop.first %}{% set y = x %}{% endif %}{{ y }}{% endfor %}", "3"},
    {"{% set y = \"out\" %}{% for x in l %}{{ y }}{% set y = x %}{% endfor %}{{ y }}",
     "outoutoutout"},
    {"{% macro m() %}{% set z = 1 %}{{ z }}{% endmacro %}{{ m() }}{{ z }}", "1"},
    {"{% for x in l %}{% set x = 5 %}{{ x }}{% endfor %}", "555"},
    {"{% for m in msgs %}{% set content = m.content %}{% if loop.last %}{{ content }}{% endif %}{% "
     "endfor %}{{ content }}",
     "yo"},
    {"{% set outer = 1 %}{% macro m2() %}{{ outer }}{% endmacro %}{% set outer = 2 %}{{ m2() }}",
     "2"},
    {"{% for x in [1] %}{% macro inner() %}{{ x }}{% endmacro %}{{ inner() }}{% endfor %}", "1"},
    {"{% set ns = namespace(a=[]) %}{% set ns.a = ns.a + [1] %}{{ ns.a }} {{ ns }}",
     "[1] <Namespace {'a': [1]}>"},
    {"{% filter upper %}{% set fz = \"a\" %}{{ fz }}{% endfilter %}[{{ fz }}]", "A[]"},
    {"{% set sb %}{% set sz = 1 %}{{ sz }}{% endset %}[{{ sb }}][{{ sz }}]", "[1][]"},
    {"{% macro w() %}{{ caller() }}{% endmacro %}{% call w() %}{% set cz = 2 %}{{ cz }}{% endcall "
     "%}[{{ cz }}]",
     "2[]"},
    {"{% for x in l %}{% for y in [x] %}{% set x = 9 %}{% endfor %}{{ x }}{% endfor %}", "312"},
    {"{% set a = 1 %}{% if t %}{% set a = 2 %}{% endif %}{{ a }}", "2"},
    {"{% for x in l %}{{ loop.index }}{% if loop.last %}!{% endif %}{% else %}none{% endfor %}",
     "123!"},
    {"{% for x in l if x != 1 %}{{ loop.index }}{{ loop.last }}{% endfor %}", "1False2True"},
    {"{% for k in d | sort %}{{ k }}{% endfor %}", "abc"},
    {"{% for a, b in d | dictsort %}{{ a }}{% endfor %}", "abc"},
    {"{% for x in l %}{{ x }}{% if x == 1 %}{% break %}{% endif %}{% else %}else{% endfor %}",
     "31"},
    {"{{ l | selectattr(\"x\", \"defined\") | list }}", "[]"},
    {"{% set x = [1, 2] %}{% for a in x %}{% set x = [] %}{{ a }}{% endfor %}{{ x }}", "12[1, 2]"},
    {"{{ n | round }} {{ t | round }} {{ 2.5 | round }} {{ 3.14159 | round(3) }} {{ 2.675 | "
     "round(2) }} {{ 15 | round(-1) }}",
     "3 1 2.0 3.142 2.67 20"},
    {"{{ msgs[0] is lower }} {{ u is lower }} {{ \"\303\211COLE\" is upper }} {{ \"123\" is lower "
     "}}",
     "True False True False"},
    {"{{ msgs | unique | list }}", NULL},
    {"{{ zz | dictsort }}", NULL},
    {"{{ zz | int }}", NULL},
    {"{{ zz | float }}", NULL},
    {"{{ 2.5 is divisibleby 2 }} {{ 4.0 is divisibleby 2 }} {{ 2.5 is odd }} {{ 3.0 is odd }} {{ "
     "-3 is odd }}",
     "False True False True True"},
    {"{{ l | truncate(5) }} {{ \"a\n\" | indent(2) }}|{{ \"a\nb\n\" | indent(2, true) }}|{{ \"\n\" "
     "| indent }}|{{ \"\" | indent(first=true) }}|{{ \"x\\r\ny\" | indent(1) }}",
     "[3, 1, 2] a\n|  a\n  b\n|\n|    |x\n y"},
    {"{{ n | truncate(5) }}", NULL},
    {"{{ 5 | indent }}", NULL},
    {"{{ u | list | sort | join }} {{ [\"b\", \"\303\204\", \"a\", \"\303\244\"] | sort }} {{ "
     "[\"b\", \"\303\204\", \"a\"] | sort(case_sensitive=true) }} {{ u | list | max }}",
     "  cdn\303\251\303\257\303\266\303\234\342\234\223\344\275\240\345\245\275 ['a', 'b', "
     "'\303\204', '\303\244'] ['a', 'b', '\303\204'] \345\245\275"},
    {"{{ l in d }}", NULL},
    {"{{ \"abc\" % [1] }} {{ \"abc\" % {\"k\": 1} }}", "abc abc"},
    {"{{ \"abc\" % 1 }}", NULL},
    {"{{ \"<b>Hi</b>  <!-- c -->there &amp; &lt;you&gt;\n <br/>x\" | striptags }}|{{ \"  <p> a "
     "</p> \" | striptags }}|{{ \"a<b\" | striptags }}",
     "Hi there & <you> x|a|a<b"},
    {"{{ s | attr(\"upper\") is callable }} {{ d | attr(\"b\") }}| {{ msgs | attr(\"x\") }}|",
     "True | |"},
    // Hugging Face's generation block (LFM2.5): its body renders unchanged
    {"a{% generation %}{{ n }}{% if t %}b{% endif %}{% endgeneration %}c", "a3bc"},
    {"{% generation %}x", NULL},
};

static const struct tm fixed_now = {.tm_year = 126,
                                    .tm_mon = 0,
                                    .tm_mday = 2,
                                    .tm_hour = 3,
                                    .tm_min = 4,
                                    .tm_sec = 5,
                                    .tm_wday = 5,
                                    .tm_yday = 1};

/* Renders src over the JSON context text; returns the rc and fills out (caller deinits). */
static int render_with(const char *src, const char *ctx_json, const struct jinja_render_opts *opts,
                       struct buf *out, struct errmsg *err)
{
    struct jinja_template *t = NULL;
    buf_init(out);
    int rc = jinja_template_new(src, strlen(src), &t, err);
    if (rc != ERR_OK) return rc;
    json_t *ctx = ctx_json ? json_loads(ctx_json, 0, NULL) : NULL;
    rc = jinja_template_render_opts(t, ctx, opts, out, err);
    json_decref(ctx);
    jinja_template_free(t);
    return rc;
}

/* Asserts src renders exactly want over ctx_json. */
static void expect(const char *src, const char *ctx_json, const char *want)
{
    struct buf out;
    struct errmsg err;
    struct jinja_render_opts opts = {.now = &fixed_now};
    int rc = render_with(src, ctx_json, &opts, &out, &err);
    if (rc != ERR_OK) fail_msg("template %s failed: %s", src, err.msg);
    assert_string_equal(out.data ? out.data : "", want);
    buf_deinit(&out);
}

/* Asserts src fails with code rc, and err contains needle (when not NULL). */
static void expect_fail(const char *src, const char *ctx_json, int rc_want, const char *needle)
{
    struct buf out;
    struct errmsg err;
    struct jinja_render_opts opts = {.now = &fixed_now};
    int rc = render_with(src, ctx_json, &opts, &out, &err);
    buf_deinit(&out);
    if (rc != rc_want) fail_msg("template %s: rc %d (%s), want %d", src, rc, err.msg, rc_want);
    if (needle && !strstr(err.msg, needle))
        fail_msg("template %s: message '%s' lacks '%s'", src, err.msg, needle);
}

static void test_against_jinja2(void **state)
{
    (void)state;
    int64_t live = mem_live_count();
    for (size_t i = 0; i < sizeof render_cases / sizeof render_cases[0]; i++) {
        struct buf out;
        struct errmsg err;
        struct jinja_render_opts opts = {.now = &fixed_now};
        const struct render_case *c = &render_cases[i];
        int rc = render_with(c->src, CASE_CONTEXT, &opts, &out, &err);
        if (!c->want && rc == ERR_OK)
            fail_msg("case %zu %s: rendered '%s', Jinja2 raised", i, c->src, out.data);
        if (c->want && rc != ERR_OK) fail_msg("case %zu %s: failed: %s", i, c->src, err.msg);
        if (c->want && strcmp(out.data ? out.data : "", c->want) != 0)
            fail_msg("case %zu %s:\n  want '%s'\n  got  '%s'", i, c->src, c->want, out.data);
        buf_deinit(&out);
    }
    assert_int_equal(mem_live_count(), live);
}

static void test_whitespace_control(void **state)
{
    (void)state;
    // trim_blocks eats the newline after a block tag; lstrip_blocks the indent before it
    expect("a\n  {% if true %}\n  b\n  {% endif %}\nc", NULL, "a\n  b\nc");
    expect("{{ 'x' }}\n{{ 'y' }}", NULL, "x\ny");
    expect("x  {{- ' y ' -}}  z", NULL, "x y z");
    expect("  {%+ if true %}k{% endif %}", NULL, "  k");
    expect("{% if true +%}\nk{% endif %}", NULL, "\nk");
    expect("a {#- note -#} b\n  {# c #}\nd", NULL, "ab\nd");
    // one trailing newline is dropped, \r\n becomes \n
    expect("a\r\nb\n", NULL, "a\nb");
    expect("{% raw %}{{ x }}{% endraw %}", NULL, "{{ x }}");
}

static void test_errors(void **state)
{
    (void)state;
    expect_fail("{{ raise_exception('Only user and assistant roles') }}", NULL, ERR_INVALID, NULL);
    struct buf out;
    struct errmsg err;
    assert_int_equal(render_with("a{{ raise_exception('exact text') }}", NULL, NULL, &out, &err),
                     ERR_INVALID);
    assert_string_equal(err.msg, "exact text");
    buf_deinit(&out);
    expect_fail("\n\n  {{ x.y }}", NULL, ERR_INVALID, "line 3 col");
    expect_fail("{{ 'a' + 1 }}", NULL, ERR_INVALID, "can only concatenate str");
    expect_fail("{{ [] | nosuch }}", NULL, ERR_INVALID, "No filter named 'nosuch'");
    expect_fail("{{ 1 is nosuch }}", NULL, ERR_INVALID, "No test named 'nosuch'");
    expect_fail("{{ m.append(1) }}", "{\"m\": []}", ERR_INVALID, "unsafe");
    expect_fail("{% set x.y = 1 %}", "{\"x\": {}}", ERR_INVALID, "non-namespace");
    // syntax errors are reported by jinja_template_new
    struct jinja_template *t = NULL;
    const char *bad[] = {"{% if x %}",          "{{ x ",       "{% for %}{% endfor %}",
                         "{% generation %}",    "{{ (1 }}",    "{# open",
                         "{{ 'unterminated }}", "{% endif %}", "{{ }}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = jinja_template_new(bad[i], strlen(bad[i]), &t, &err);
        if (rc != ERR_FORMAT) fail_msg("'%s' parsed (rc %d)", bad[i], rc);
        assert_non_null(strstr(err.msg, "line 1 col"));
    }
}

static void test_limits(void **state)
{
    (void)state;
    int64_t live = mem_live_count();
    expect_fail("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", NULL, ERR_LIMIT, "recursion");
    struct buf out;
    struct errmsg err;
    struct jinja_render_opts few_steps = {.max_steps = 10000};
    assert_int_equal(render_with("{% for i in range(100000) %}{{ i }}{% endfor %}", NULL,
                                 &few_steps, &out, &err),
                     ERR_LIMIT);
    buf_deinit(&out);
    struct jinja_render_opts small = {.max_bytes = 1 << 20};
    assert_int_equal(render_with("{% set ns = namespace(s='x') %}{% for i in range(64) %}"
                                 "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
                                 NULL, &small, &out, &err),
                     ERR_LIMIT);
    buf_deinit(&out);
    // max_out_bytes stops the output early, however many steps and bytes remain; a macro's
    // own output (which may be dropped) is not counted against it
    struct jinja_render_opts short_out = {.max_out_bytes = 100};
    assert_int_equal(render_with("{% for i in range(1000000) %}{{ i }},{% endfor %}", NULL,
                                 &short_out, &out, &err),
                     ERR_LIMIT);
    assert_true(out.len > 100 && out.len < 200);
    assert_non_null(strstr(err.msg, "output larger than 100 bytes"));
    buf_deinit(&out);
    assert_int_equal(render_with("{% macro m() %}{{ 'x' * 500 }}{% endmacro %}"
                                 "{{ m() | length }}",
                                 NULL, &short_out, &out, &err),
                     ERR_OK);
    assert_string_equal(out.data, "500");
    buf_deinit(&out);
    // a string joined longer than the bound is refused before it is copied, and said so
    bool is_over = false;
    struct jinja_render_opts flagged = {.max_out_bytes = 100, .is_out_over = &is_over};
    assert_int_equal(render_with("{{ ('a' * 80) ~ ('b' * 80) }}", NULL, &flagged, &out, &err),
                     ERR_LIMIT);
    assert_true(is_over);
    assert_int_equal(out.len, 0);
    buf_deinit(&out);
    is_over = false;
    assert_int_equal(render_with("{{ ('a' * 40) ~ ('b' * 40) }}", NULL, &flagged, &out, &err),
                     ERR_OK);
    assert_false(is_over);
    buf_deinit(&out);
    // an empty sequence repeated a huge number of times is empty at once (it used to loop)
    assert_int_equal(render_with("{{ '' * 100000000000000000 }}{{ [] * 100000000000000000 }}"
                                 "{{ 44444444444 * 4444444 * 'abc'[2:-6] }}x",
                                 NULL, &few_steps, &out, &err),
                     ERR_OK);
    assert_string_equal(out.data, "[]x");
    buf_deinit(&out);
    // deep nesting in the source is refused at parse time, not by exhausting the stack
    struct buf src;
    buf_init(&src);
    buf_append_cstr(&src, "{{ ");
    for (int i = 0; i < 5000; i++)
        buf_append_byte(&src, '(');
    buf_append_byte(&src, '1');
    for (int i = 0; i < 5000; i++)
        buf_append_byte(&src, ')');
    buf_append_cstr(&src, " }}");
    struct jinja_template *t = NULL;
    assert_int_equal(jinja_template_new(src.data, src.len, &t, &err), ERR_LIMIT);
    buf_clear(&src);
    for (int i = 0; i < 1000; i++)
        buf_append_cstr(&src, "{% if true %}");
    assert_int_equal(jinja_template_new(src.data, src.len, &t, &err), ERR_LIMIT);
    buf_deinit(&src);
    assert_int_equal(mem_live_count(), live);
}

static const char FAULT_TEMPLATE[] =
    "{%- set ns = namespace(sys='') -%}{%- for m in messages -%}{%- if m.role == 'system' -%}"
    "{%- set ns.sys = m.content -%}{%- else -%}<{{ m.role | upper }}>{{ m.content | trim }}"
    "{{ m.tool_calls | tojson if m.tool_calls is defined }}{% endif %}{% endfor %}{{ ns.sys }}"
    "{% macro f(x, y=2) %}{{ x * y }}{% endmacro %}{{ f(3) }}{{ tools | map(attribute='name') "
    "| list }}{{ ('a,b,c'.split(',') | join('-'))[::-1] }}";
static const char FAULT_CONTEXT[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", "
    "\"content\": \" hi \"}, {\"role\": \"assistant\", \"content\": \"x\", \"tool_calls\": "
    "[{\"a\": 1}]}], \"tools\": [{\"name\": \"t1\"}, {\"name\": \"t2\"}]}";

static void test_alloc_failures(void **state)
{
    (void)state;
    json_t *ctx = json_loads(FAULT_CONTEXT, 0, NULL);
    assert_non_null(ctx);
    int64_t live = mem_live_count();
    bool done = false;
    for (int64_t n = 0; !done && n < 10000; n++) {
        struct jinja_template *t = NULL;
        struct errmsg err;
        struct buf out;
        buf_init(&out);
        mem_fail_after(n);
        int rc = jinja_template_new(FAULT_TEMPLATE, strlen(FAULT_TEMPLATE), &t, &err);
        if (rc == ERR_OK) {
            rc = jinja_template_render(t, ctx, &out, &err);
            jinja_template_free(t);
        }
        mem_fail_after(-1);
        if (rc == ERR_OK) {
            assert_string_equal(out.data, "<USER>hi<ASSISTANT>x[{\"a\": 1}]S6['t1', 't2']c-b-a");
            done = true;
        } else {
            assert_int_equal(rc, ERR_NOMEM);
        }
        buf_deinit(&out);
        assert_int_equal(mem_live_count(), live);
    }
    assert_true(done);
    json_decref(ctx);
}

struct render_job {
    const struct jinja_template *t;
    const json_t *ctx;
    const char *want;
    int n_ok;
};

static void *render_many(void *arg)
{
    struct render_job *job = arg;
    for (int i = 0; i < 200; i++) {
        struct buf out;
        struct errmsg err;
        buf_init(&out);
        if (jinja_template_render(job->t, job->ctx, &out, &err) == ERR_OK &&
            strcmp(out.data, job->want) == 0)
            job->n_ok++;
        buf_deinit(&out);
    }
    return NULL;
}

static void test_concurrent_renders(void **state)
{
    (void)state;
    struct jinja_template *t = NULL;
    struct errmsg err;
    assert_int_equal(jinja_template_new(FAULT_TEMPLATE, strlen(FAULT_TEMPLATE), &t, &err), ERR_OK);
    json_t *ctx = json_loads(FAULT_CONTEXT, 0, NULL);
    struct render_job jobs[4];
    struct thread th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] =
            (struct render_job){t, ctx, "<USER>hi<ASSISTANT>x[{\"a\": 1}]S6['t1', 't2']c-b-a", 0};
        assert_int_equal(thread_start(&th[i], render_many, &jobs[i]), ERR_OK);
    }
    for (int i = 0; i < 4; i++) {
        thread_join(&th[i]);
        assert_int_equal(jobs[i].n_ok, 200);
    }
    json_decref(ctx);
    jinja_template_free(t);
}

static void test_context_values(void **state)
{
    (void)state;
    // JSON key order is kept, floats print like Python, unicode passes through tojson
    expect("{{ d | tojson }}|{{ d }}", "{\"d\": {\"z\": 1.0, \"a\": [true, null, \"\\u00e9\"]}}",
           "{\"z\": 1.0, \"a\": [true, null, \"\303\251\"]}|{'z': 1.0, 'a': [True, None, "
           "'\303\251']}");
    expect("{{ x }}", NULL, "");
    expect("{{ x is defined }}", "{\"x\": null}", "True");
    expect("{{ jinja_template_render }}", "[1]", ""); // a non-object context gives no variables
}

static void test_chat_template_builtins(void **state)
{
    (void)state;
    assert_non_null(chat_template_builtin("chatml"));
    assert_null(chat_template_builtin("nope"));
    assert_string_equal(chat_template_default(), chat_template_builtin("chatml"));
    json_t *msgs = json_loads("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": "
                              "\"user\", \"content\": [{\"type\": \"text\", \"text\": \"A\"}, "
                              "{\"type\": \"image_url\"}, {\"type\": \"text\", \"text\": \"B\"}]}]",
                              0, NULL);
    assert_non_null(msgs);
    static const char *const want[][2] = {
        {"chatml", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nA\nB<|im_end|>\n"
                   "<|im_start|>assistant\n"},
        {"llama3", "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                   "<|start_header_id|>user<|end_header_id|>\n\nA\nB<|eot_id|>"
                   "<|start_header_id|>assistant<|end_header_id|>\n\n"},
        {"mistral", "<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]A\nB[/INST]"},
        {"command-r", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>Be brief.<|END_OF_TURN_TOKEN|>"
                      "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>A\nB<|END_OF_TURN_TOKEN|>"
                      "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
        {"gemma", "<s><start_of_turn>user\nBe brief.\n\nA\nB<end_of_turn>\n<start_of_turn>model\n"},
    };
    struct chat_template_opts opts = {.add_generation_prompt = true,
                                      .enable_thinking = -1,
                                      .bos_token = "<s>",
                                      .eos_token = "</s>"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(chat_template_builtin_name(i), want[i][0]);
        const char *src = chat_template_builtin(want[i][0]);
        struct jinja_template *t = NULL;
        struct errmsg err;
        struct buf out;
        buf_init(&out);
        assert_int_equal(jinja_template_new(src, strlen(src), &t, &err), ERR_OK);
        assert_int_equal(chat_template_apply(t, msgs, NULL, &opts, &out, &err), ERR_OK);
        assert_string_equal(out.data, want[i][1]);
        buf_deinit(&out);
        jinja_template_free(t);
    }
    assert_null(chat_template_builtin_name(sizeof want / sizeof want[0]));
    json_decref(msgs);
}

static void test_chat_template_context(void **state)
{
    (void)state;
    json_t *msgs = json_loads(
        "[{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", "
        "\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}}, {\"function\": "
        "{\"name\": \"g\", \"arguments\": \"not json\"}}]}]",
        0, NULL);
    json_t *tools = json_loads("[{\"type\": \"function\"}]", 0, NULL);
    json_t *extra = json_loads("{\"reasoning_effort\": \"low\"}", 0, NULL);
    struct chat_template_opts opts = {.enable_thinking = 0, .extra = extra};
    json_t *ctx = NULL;
    struct errmsg err;
    int crc = chat_template_context(msgs, tools, &opts, &ctx, &err);
    if (crc != ERR_OK) fail_msg("context: %s", err.msg);
    char *text = json_dumps(ctx, JSON_COMPACT);
    assert_string_equal(
        text, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":"
              "\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}},{\"function\":"
              "{\"name\":\"g\",\"arguments\":\"not json\"}}]}],\"tools\":[{\"type\":\"function\"}],"
              "\"add_generation_prompt\":false,\"bos_token\":\"\",\"eos_token\":\"\","
              "\"enable_thinking\":false,\"reasoning_effort\":\"low\"}");
    free(text);
    json_decref(ctx);
    // the caller's messages are untouched
    text = json_dumps(msgs, JSON_COMPACT);
    assert_non_null(strstr(text, "\"content\":null"));
    assert_non_null(strstr(text, "\"arguments\":\"{\\\"a\\\": 1}\""));
    free(text);
    json_t *bad = json_loads("[1]", 0, NULL);
    assert_int_equal(chat_template_context(bad, NULL, NULL, &ctx, &err), ERR_INVALID);
    assert_int_equal(chat_template_context(tools, extra, NULL, &ctx, &err), ERR_INVALID);
    assert_int_equal(chat_template_context(extra, NULL, NULL, &ctx, &err), ERR_INVALID);
    json_decref(bad);
    json_decref(msgs);
    json_decref(tools);
    json_decref(extra);
}

/* The context's objects become the template's dicts in time linear in their keys (a lookup
 * per key made a tool schema of many properties quadratic), and a two-key message takes room
 * for two entries, not eight. */
static double render_wide_cpu_s(int n)
{
    json_t *d = json_object(), *ctx = json_object();
    for (int i = 0; i < n; i++) {
        char key[24];
        snprintf(key, sizeof key, "k%d", i);
        json_object_set_new(d, key, json_integer(i));
    }
    json_object_set_new(ctx, "d", d);
    const char *src = "{{ d | length }} {{ d['k7'] }}";
    struct jinja_template *t = NULL;
    struct errmsg err;
    assert_int_equal(jinja_template_new(src, strlen(src), &t, &err), ERR_OK);
    struct buf out;
    buf_init(&out);
    clock_t t0 = clock();
    assert_int_equal(jinja_template_render_opts(t, ctx, NULL, &out, &err), ERR_OK);
    double s = (double)(clock() - t0) / CLOCKS_PER_SEC;
    char want[32];
    snprintf(want, sizeof want, "%d 7", n);
    assert_string_equal(out.data, want);
    buf_deinit(&out);
    jinja_template_free(t);
    json_decref(ctx);
    return s;
}

static void test_wide_context_is_linear(void **state)
{
    (void)state;
    render_wide_cpu_s(1000); // warm the allocator
    double t_n = render_wide_cpu_s(20000), t_4n = render_wide_cpu_s(80000);
    print_message("figure: context conversion CPU 20000 keys %.3f s, 80000 keys %.3f s\n", t_n,
                  t_4n);
    assert_true(t_4n < 8 * t_n + 0.1);
    // a long conversation of small messages fits the default memory limit
    struct buf msgs;
    buf_init(&msgs);
    buf_append_cstr(&msgs, "{\"messages\": [");
    for (int i = 0; i < 300000; i++)
        buf_append_cstr(&msgs, i ? ", {\"role\": \"user\", \"content\": \"x\"}"
                                 : "{\"role\": \"user\", \"content\": \"x\"}");
    buf_append_cstr(&msgs, "]}");
    struct buf out;
    struct errmsg err;
    struct jinja_render_opts limit = {.max_bytes = 64u << 20};
    assert_int_equal(render_with("{{ messages | length }}", msgs.data, &limit, &out, &err), ERR_OK);
    assert_string_equal(out.data, "300000");
    buf_deinit(&out);
    buf_deinit(&msgs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_jinja2),
        cmocka_unit_test(test_whitespace_control),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_wide_context_is_linear),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_concurrent_renders),
        cmocka_unit_test(test_context_values),
        cmocka_unit_test(test_chat_template_builtins),
        cmocka_unit_test(test_chat_template_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
