/* symbol-cycles.py's self-test: called by both, calls nothing. */
int leaf_add(int a, int b);

/* The sum. */
int leaf_add(int a, int b)
{
    return a + b;
}
