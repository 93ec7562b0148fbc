// gpujoin inlj kernels (under construction).
#include "gpujoin_inlj.h"
