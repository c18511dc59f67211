# Generates a .cpp defining `extern const char* const NAME` with the contents of INPUT.
# Run as: cmake -DINPUT=... -DOUTPUT=... -DNAME=... -DNAMESPACE=... -P embed_text.cmake
file(READ ${INPUT} content HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
file(WRITE ${OUTPUT}.tmp
  "// Generated from ${INPUT}; do not edit.\nnamespace ${NAMESPACE} {\n"
  "static const unsigned char kData[] = {${bytes} 0};\n"
  "extern const char* const ${NAME};\nconst char* const ${NAME} = reinterpret_cast<const char*>(kData);\n}\n")
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
