-: src/media/audio.h src/util/err.h src/util/str.h
src/util/err.h:
src/util/str.h:
