/* keeps tj_testutil non-empty */
typedef int tj_testutil_empty;
