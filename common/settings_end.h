/*
 * The end of an expansion of DPT_SETTINGS (common/settings.def): every
 * column macro a reader may have defined, and X, undefined, so that the
 * next reader starts afresh. Included (again) after each expansion.
 */
#undef X
#undef SRUN
#undef NO_SRUN
#undef USER
#undef USER_ELSE_SITE
#undef SITE
#undef NO_USER
#undef KEY
#undef NO_KEYS
#undef COORD
#undef NO_COORD
