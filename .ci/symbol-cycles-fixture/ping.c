/* symbol-cycles.py's self-test: ping.c and pong.c call each other (the
 * circle it must report); both call leaf.c, which calls nothing. */
int pong_serve(int n);
int leaf_add(int a, int b);
int ping_reply(int n);

/* Answers pong: the edge pong -> ping. */
int ping_reply(int n)
{
    return leaf_add(n, 1);
}

/* Starts a rally: the edge ping -> pong. */
int ping_start(int n);
int ping_start(int n)
{
    return pong_serve(n);
}
