#!/usr/bin/env python3
"""embed_text.py - turn a text file into a C++ source defining one std::string_view.

Usage: embed_text.py INPUT OUTPUT NAMESPACE::NAME
Used by the build to embed config/cleaved.yaml into cleaved as its default configuration.
"""
import sys

src, dst, qualified = sys.argv[1:4]
ns, _, name = qualified.rpartition("::")
text = open(src, encoding="utf-8").read()
delim = "cleave_embed"
if ")" + delim + '"' in text:
    sys.exit(f"{src}: contains the raw-string delimiter {delim}")
with open(dst, "w", encoding="utf-8") as out:
    out.write(f"// Generated from {src} by tools/embed_text.py. Do not edit.\n")
    out.write("#include <string_view>\n")
    out.write(f"namespace {ns} {{\n")
    out.write(f'extern const std::string_view {name};\n')
    out.write(f'const std::string_view {name} = R"{delim}({text}){delim}";\n')
    out.write("}\n")
