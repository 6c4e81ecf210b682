-- renew_write: extend many write holds in one call (see renew_holds).
return renew_holds()
