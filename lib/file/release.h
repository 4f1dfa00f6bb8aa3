/* release.h — letting go of a replaced output off the caller's thread (release.c). */
#ifndef CKPZ_FILE_RELEASE_H
#define CKPZ_FILE_RELEASE_H

/* Opens a reference to the regular file `name` (O_PATH: no read permission needed) so
 * that renaming another file over it does not free its blocks on the spot; -1 when
 * there is none (no such file, not a regular file, or the system refuses). */
int release_hold(const char *name);

/* Drops a reference release_hold took: the file's blocks are freed on a thread of the
 * library's own, not the caller's, where one can be started; at once otherwise.
 * -1 is ignored. */
void release_later(int fd);

#endif
