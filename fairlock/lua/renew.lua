-- renew: extend many holds in one call (see renew_holds).
return renew_holds()
