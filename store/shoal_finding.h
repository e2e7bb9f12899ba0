/*  shoal_finding: what a consistency check found, as every check reports it.

    The node's sweep (node/shoal_fsck.h) runs one check per store and module,
    each reporting what it finds through a shoal_finding_fn: where (a column
    family, or "files"), which key or path, what is wrong, and whether the
    repair the check offers may mend it. A check never mends anything while
    it looks; the sweep decides, once the look is over.
*/
#ifndef SHOAL_FINDING_H_INCLUDED
#define SHOAL_FINDING_H_INCLUDED

#include <stdbool.h>

typedef struct {
    const char *where;          //  a column family's name, or "files"
    const char *key;            //  the key as shoal_key_format renders it, or a path
    const char *problem;        //  what is wrong, in a sentence
    bool repairable;            //  the check's repair mends it
} shoal_finding_t;

//  Told of each finding; everything is borrowed for the call.
typedef void (shoal_finding_fn) (const shoal_finding_t *finding, void *arg);

#endif
